// Package runtest is a test fixture for the run domain: a fresh database, an
// outbox whose relay records published events instead of delivering them,
// the stores, helpers to make users, threads and runs, and (NewStreamed) a
// real Redis run stream with a reader.
//
// Imported by: tests only. May import: shared/*, events, pgx, go-redis, the
// CloudEvents SDK, testing.
package runtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Recorder is a Publisher that records events and acknowledges them.
type Recorder struct {
	mu     sync.Mutex
	events []cloudevents.Event
	wake   chan struct{}
}

// Publish implements outbox.Publisher.
func (r *Recorder) Publish(ctx context.Context, ev cloudevents.Event) error {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

// Events returns the recorded events of a type.
func (r *Recorder) Events(eventType string) []cloudevents.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []cloudevents.Event
	for _, e := range r.events {
		if e.Type() == eventType {
			out = append(out, e)
		}
	}
	return out
}

// Models accepts every spec except those of provider "missing".
type Models struct{ Default string }

func (m Models) Available(spec string) error {
	if len(spec) >= 8 && spec[:8] == "missing:" {
		return failure.Unprocessable("model_not_available", "no provider")
	}
	return nil
}
func (m Models) DefaultModel() string { return m.Default }

// Fixture holds the stores over a fresh database.
type Fixture struct {
	T        testing.TB
	Pool     *pgxpool.Pool
	URL      string
	Recorder *Recorder
	Relay    *outbox.Relay
	Outbox   *outbox.Outbox
	Runs     *run.Store
	Agents   *agent.Store
	Threads  *thread.Store
	Queue    *queue.Service
	Tools    *tool.Registry
	// Stream is set by NewStreamed: the Redis run stream Runs writes to.
	Stream *Stream
}

// New builds a fixture; everything is released when t ends.
func New(t testing.TB) *Fixture {
	t.Helper()
	pool, url := pgtest.NewDatabase(t)
	rec := &Recorder{wake: make(chan struct{}, 1)}
	relay := outbox.NewRelay(pool, rec, outbox.RelayConfig{Claim: 5 * time.Second, AckInterval: time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; relay.Wait() })
	ob := &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: 5 * time.Second}, Relay: relay}
	tools := tool.NewRegistry(tool.AskUserQuestion{}, tool.MarkForImprovement{Pool: pool})
	agents := agent.NewStore(pool, tools.Has)
	f := &Fixture{T: t, Pool: pool, URL: url, Recorder: rec, Relay: relay, Outbox: ob, Runs: run.NewStore(pool, ob, nil, nil),
		Agents: agents, Threads: thread.NewStore(pool), Tools: tools}
	f.Queue = queue.NewService(pool, ob, f.Runs, agents, Models{Default: "fake:model"}, nil)
	return f
}

// User inserts a user and returns its access subject.
func (f *Fixture) User(uid string) access.Subject {
	f.T.Helper()
	if _, err := f.Pool.Exec(context.Background(), `INSERT INTO users (uid, username, password_hash, role, department_id)
		VALUES ($1, $1, 'x', 'user', 1)`, uid); err != nil {
		f.T.Fatalf("insert user: %v", err)
	}
	d := int64(1)
	return access.Subject{UID: uid, Role: "user", DepartmentID: &d}
}

// Thread creates a thread of uid with the default agent.
func (f *Fixture) Thread(uid string) string {
	f.T.Helper()
	th, err := f.Threads.Create(context.Background(), uid, thread.CreateInput{AgentID: "default-chatbot"})
	if err != nil {
		f.T.Fatalf("create thread: %v", err)
	}
	return th.ID
}

// Submit sends a message with the enqueue policy unless policy is given.
func (f *Fixture) Submit(sub access.Subject, threadID, query, policy string) (queue.Intake, error) {
	return f.Queue.Submit(context.Background(), queue.Submission{Subject: sub, Query: query, AgentSlug: "default-chatbot", ThreadID: threadID, QueuePolicy: policy})
}

// MustSubmit is Submit that fails the test on error.
func (f *Fixture) MustSubmit(sub access.Subject, threadID, query, policy string) queue.Intake {
	f.T.Helper()
	in, err := f.Submit(sub, threadID, query, policy)
	if err != nil {
		f.T.Fatalf("submit %q: %v", query, err)
	}
	return in
}

// Complete claims and commits a one-step run that answers text.
func (f *Fixture) Complete(runID, text string) run.Run {
	f.T.Helper()
	ctx := context.Background()
	r, err := f.Runs.Get(ctx, runID)
	if err != nil {
		f.T.Fatal(err)
	}
	c, err := f.Runs.Claim(ctx, runID, r.StepCount+1, "test-worker", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		f.T.Fatalf("claim %s: %v %v", runID, c.Outcome, err)
	}
	res, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: r.StepCount + 1, Owner: run.Owner{Worker: "test-worker", Attempt: c.Attempt},
		StartedAt: time.Now(), Content: text, StreamMessageID: "m"})
	if err != nil {
		f.T.Fatalf("commit %s: %v", runID, err)
	}
	return res.Run
}

// Fail ends a run as failed.
func (f *Fixture) Fail(runID string) run.Run {
	f.T.Helper()
	r, changed, err := f.Runs.Finish(context.Background(), runID, run.Finish{Status: run.StatusFailed, ErrorType: "test", ErrorMessage: "boom"})
	if err != nil || !changed {
		f.T.Fatalf("fail %s: %v %v", runID, changed, err)
	}
	return r
}

// Count runs a count(*) query.
func (f *Fixture) Count(sql string, args ...any) int {
	f.T.Helper()
	var n int
	if err := f.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		f.T.Fatalf("%s: %v", sql, err)
	}
	return n
}

// WaitEvents waits until at least n events of a type were published.
func (f *Fixture) WaitEvents(eventType string, n int) []cloudevents.Event {
	f.T.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if evs := f.Recorder.Events(eventType); len(evs) >= n {
			return evs
		}
		select {
		case <-f.Recorder.wake:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			f.T.Fatalf("waited for %d %s events, got %d", n, eventType, len(f.Recorder.Events(eventType)))
		}
	}
}

// Decode decodes an event's data.
func Decode[T any](t testing.TB, ev cloudevents.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data(), &v); err != nil {
		t.Fatalf("decode %s: %v", ev.Type(), err)
	}
	return v
}

// Str formats for messages.
func Str(v any) string { return fmt.Sprintf("%+v", v) }
