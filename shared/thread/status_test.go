package thread_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// insertRun writes an agent_runs row directly, created at base+offset.
func insertRun(t *testing.T, pool *pgxpool.Pool, th thread.Thread, id, status, runType string, parent *string, at time.Time) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO agent_runs (id, conversation_thread_id, conversation_id, runtime_scope_id,
		agent_slug, uid, status, request_id, run_type, created_by_run_id, created_at)
		VALUES ($1, $2, $3, $2, $4, $5, $6, 'req-' || $1, $7, $8, $9)`,
		id, th.ID, th.ConversationID, th.AgentID, th.UID, status, runType, parent, at); err != nil {
		t.Fatalf("insert run %s: %v", id, err)
	}
}

func setStatus(t *testing.T, pool *pgxpool.Pool, id, status string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE agent_runs SET status = $2 WHERE id = $1`, id, status); err != nil {
		t.Fatal(err)
	}
}

func markViewed(t *testing.T, pool *pgxpool.Pool, th thread.Thread, runID string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE conversations SET last_viewed_run_id = $2 WHERE thread_id = $1`, th.ID, runID); err != nil {
		t.Fatal(err)
	}
}

// statusEverywhere reads thread_status through Get and List, which must agree.
func statusEverywhere(t *testing.T, s *thread.Store, th thread.Thread) string {
	t.Helper()
	got, err := s.Get(context.Background(), th.UID, th.ID)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.List(context.Background(), th.UID, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range l {
		if x.ID == th.ID && x.ThreadStatus != got.ThreadStatus {
			t.Fatalf("Get says %q, List says %q", got.ThreadStatus, x.ThreadStatus)
		}
	}
	return got.ThreadStatus
}

func TestThreadStatusFollowsTheLatestRun(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	th := mustCreate(t, s, "alice", thread.CreateInput{})
	base := time.Now().Add(-time.Hour)

	if got := statusEverywhere(t, s, th); got != "done" {
		t.Fatalf("no runs: %q, want done", got)
	}
	insertRun(t, pool, th, "run-1", "pending", "chat", nil, base)
	for _, st := range []string{"pending", "running", "cancel_requested"} {
		setStatus(t, pool, "run-1", st)
		if got := statusEverywhere(t, s, th); got != "loading" {
			t.Fatalf("latest run %s: %q, want loading", st, got)
		}
	}
	for _, st := range []string{"completed", "failed", "cancelled", "interrupted"} {
		setStatus(t, pool, "run-1", st)
		if got := statusEverywhere(t, s, th); got != "ready" {
			t.Fatalf("latest run %s, not viewed: %q, want ready", st, got)
		}
	}
	markViewed(t, pool, th, "run-1")
	if got := statusEverywhere(t, s, th); got != "done" {
		t.Fatalf("latest run viewed: %q, want done", got)
	}

	// A newer run makes the thread unread again; an older viewed run does not count.
	insertRun(t, pool, th, "run-2", "running", "chat", nil, base.Add(time.Minute))
	if got := statusEverywhere(t, s, th); got != "loading" {
		t.Fatalf("second run running: %q", got)
	}
	setStatus(t, pool, "run-2", "completed")
	if got := statusEverywhere(t, s, th); got != "ready" {
		t.Fatalf("second run finished after run-1 was viewed: %q, want ready", got)
	}

	// Subagent runs are not top-level: they change nothing.
	markViewed(t, pool, th, "run-2")
	insertRun(t, pool, th, "sub-1", "running", "subagent", nil, base.Add(2*time.Minute))
	if got := statusEverywhere(t, s, th); got != "done" {
		t.Fatalf("a running subagent run: %q, want done (latest top-level run viewed)", got)
	}
	setStatus(t, pool, "sub-1", "completed")
	if got := statusEverywhere(t, s, th); got != "done" {
		t.Fatalf("a finished subagent run: %q, want done", got)
	}
	// A resume run is top-level.
	parent := "run-2"
	insertRun(t, pool, th, "resume-1", "pending", "resume", &parent, base.Add(3*time.Minute))
	if got := statusEverywhere(t, s, th); got != "loading" {
		t.Fatalf("a pending resume run: %q, want loading", got)
	}
	setStatus(t, pool, "resume-1", "completed")
	markViewed(t, pool, th, "resume-1")
	if got := statusEverywhere(t, s, th); got != "done" {
		t.Fatalf("viewed resume run: %q, want done", got)
	}
	// Viewing an older run does not hide a newer one.
	markViewed(t, pool, th, "run-1")
	if got := statusEverywhere(t, s, th); got != "ready" {
		t.Fatalf("viewed an older run: %q, want ready", got)
	}

	// Runs of another thread do not leak in.
	other := mustCreate(t, s, "alice", thread.CreateInput{})
	insertRun(t, pool, other, "other-1", "running", "chat", nil, base.Add(4*time.Minute))
	if got := statusEverywhere(t, s, th); got != "ready" {
		t.Fatalf("another thread's run changed this thread: %q", got)
	}
	if got := statusEverywhere(t, s, other); got != "loading" {
		t.Fatalf("other thread: %q", got)
	}
}

// The same, driven by the real run lifecycle.
func TestThreadStatusThroughTheQueue(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	id := f.Thread("alice")
	get := func() string {
		t.Helper()
		th, err := f.Threads.Get(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		return th.ThreadStatus
	}
	if got := get(); got != "done" {
		t.Fatalf("new thread: %q", got)
	}
	in := f.MustSubmit(alice, id, "hello", "")
	if got := get(); got != "loading" {
		t.Fatalf("after submit: %q", got)
	}
	f.Complete(*in.RunID, "hi")
	if got := get(); got != "ready" {
		t.Fatalf("after completion: %q", got)
	}
	if _, err := f.Pool.Exec(context.Background(), `UPDATE conversations SET last_viewed_run_id = $2 WHERE thread_id = $1`, id, *in.RunID); err != nil {
		t.Fatal(err)
	}
	if got := get(); got != "done" {
		t.Fatalf("after viewing: %q", got)
	}
}
