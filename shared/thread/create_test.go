package thread_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

func TestCreateThread(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()

	th := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("  Trip planning  "), AgentID: "default-chatbot",
		Metadata: json.RawMessage(`{"source": "web", "tags": ["a"]}`)})
	if len(th.ID) != 32 || th.UID != "alice" || th.AgentID != "default-chatbot" || th.Title != "Trip planning" || th.IsPinned ||
		th.ThreadStatus != "done" || th.CreatedAt.IsZero() || !th.UpdatedAt.Equal(th.CreatedAt) {
		t.Fatalf("created = %+v", th)
	}
	var meta map[string]any
	if err := json.Unmarshal(th.Metadata, &meta); err != nil || meta["source"] != "web" {
		t.Fatalf("metadata = %s", th.Metadata)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE thread_id = $1 AND uid = 'alice' AND status = 'active'
		AND extra_metadata = '{"source": "web", "tags": ["a"]}' AND creation_request_id IS NULL`, th.ID); n != 1 {
		t.Fatal("row not stored as answered")
	}

	plain := mustCreate(t, s, "alice", thread.CreateInput{})
	if plain.Title != "New conversation" || string(plain.Metadata) != "{}" || plain.ID == th.ID {
		t.Fatalf("defaults: %+v", plain)
	}
	if nullMeta := mustCreate(t, s, "alice", thread.CreateInput{Metadata: json.RawMessage(`null`)}); string(nullMeta.Metadata) != "{}" {
		t.Fatalf("null metadata = %s", nullMeta.Metadata)
	}
	before := count(t, pool, `SELECT count(*) FROM conversations`)
	for name, in := range map[string]thread.CreateInput{
		"no agent":             {},
		"blank agent":          {AgentID: "  "},
		"empty request id":     {AgentID: "a", RequestID: ptr("")},
		"long request id":      {AgentID: "a", RequestID: ptr(strings.Repeat("r", 65))},
		"long title":           {AgentID: "a", Title: ptr(strings.Repeat("t", 501))},
		"metadata is an array": {AgentID: "a", Metadata: json.RawMessage(`[1]`)},
		"metadata is a string": {AgentID: "a", Metadata: json.RawMessage(`"x"`)},
	} {
		if th, err := s.Create(ctx, "alice", in); kind(err) != failure.KindUnprocessable {
			t.Errorf("%s: want 422, got %+v %v", name, th, err)
		}
	}
	if after := count(t, pool, `SELECT count(*) FROM conversations`); after != before {
		t.Fatalf("refused creates wrote rows: %d → %d", before, after)
	}
	if _, err := s.Create(ctx, "alice", thread.CreateInput{AgentID: "a", RequestID: ptr(strings.Repeat("r", 64)), Title: ptr(strings.Repeat("t", 500))}); err != nil {
		t.Fatalf("limits are inclusive: %v", err)
	}
}

func TestCreateIsIdempotentOnRequestID(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()

	first := mustCreate(t, s, "alice", thread.CreateInput{RequestID: ptr("req-1"), Title: ptr("First")})
	// A replay answers the same thread, even with another title.
	again := mustCreate(t, s, "alice", thread.CreateInput{RequestID: ptr("req-1"), Title: ptr("Other title")})
	if again.ID != first.ID || again.Title != "First" {
		t.Fatalf("replay = %+v, want %+v", again, first)
	}
	// Another agent with the same request id is a conflict.
	if th, err := s.Create(ctx, "alice", thread.CreateInput{RequestID: ptr("req-1"), AgentID: "other-agent"}); kind(err) != failure.KindConflict || code(err) != "request_id_conflict" {
		t.Fatalf("reuse with another agent: %+v %v", th, err)
	}
	// Request ids are scoped per user: bob gets his own thread.
	bobs := mustCreate(t, s, "bob", thread.CreateInput{RequestID: ptr("req-1")})
	if bobs.ID == first.ID || bobs.UID != "bob" {
		t.Fatalf("bob's thread = %+v", bobs)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE creation_request_id = 'req-1'`); n != 2 {
		t.Fatalf("rows for req-1: %d, want 2 (alice, bob)", n)
	}
}

func TestConcurrentIdenticalCreatesMakeOneThread(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	for round := 0; round < 5; round++ {
		reqID := "req-concurrent-" + string(rune('a'+round))
		const n = 12
		var wg sync.WaitGroup
		got := make([]thread.Thread, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				got[i], errs[i] = s.Create(context.Background(), "alice", thread.CreateInput{RequestID: &reqID, AgentID: "default-chatbot", Title: ptr("Same")})
			}(i)
		}
		close(start)
		wg.Wait()
		for i := 0; i < n; i++ {
			if errs[i] != nil {
				t.Fatalf("round %d: create %d: %v", round, i, errs[i])
			}
			if got[i].ID != got[0].ID {
				t.Fatalf("round %d: creates answered different threads: %s vs %s", round, got[i].ID, got[0].ID)
			}
		}
		if c := count(t, pool, `SELECT count(*) FROM conversations WHERE creation_request_id = $1`, reqID); c != 1 {
			t.Fatalf("round %d: %d rows for one request id", round, c)
		}
	}
}

// Two agents racing for one request id: whoever loses must get a conflict,
// never the winner's thread for another agent.
func TestConcurrentCreatesWithAnotherAgentConflict(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	for round := 0; round < 10; round++ {
		reqID := "req-race-" + string(rune('a'+round))
		const n = 12
		var wg sync.WaitGroup
		got := make([]thread.Thread, n)
		errs := make([]error, n)
		agents := []string{"agent-x", "agent-y"}
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				got[i], errs[i] = s.Create(context.Background(), "alice", thread.CreateInput{RequestID: &reqID, AgentID: agents[i%2]})
			}(i)
		}
		close(start)
		wg.Wait()
		var stored string
		if err := pool.QueryRow(context.Background(), `SELECT agent_id FROM conversations WHERE creation_request_id = $1`, reqID).Scan(&stored); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := 0; i < n; i++ {
			want := agents[i%2]
			switch {
			case want == stored && errs[i] != nil:
				t.Errorf("round %d: create %d for the winning agent failed: %v", round, i, errs[i])
			case want != stored && code(errs[i]) != "request_id_conflict":
				t.Errorf("round %d: create %d for %s answered %+v %v, want request_id_conflict (stored agent %s)", round, i, want, got[i], errs[i], stored)
			}
		}
	}
}

// Replaying the create of a thread that was deleted since does not resurrect
// it, nor make a second thread for the same request id: the thread that
// request made is gone (404).
func TestReplayAfterDeleteIsNotFound(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	th := mustCreate(t, s, "alice", thread.CreateInput{RequestID: ptr("req-del")})
	if err := s.Delete(ctx, "alice", th.ID); err != nil {
		t.Fatal(err)
	}
	again, err := s.Create(ctx, "alice", thread.CreateInput{RequestID: ptr("req-del"), AgentID: "default-chatbot"})
	if !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("replay after delete: %+v %v", again, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE uid = 'alice'`); n != 1 {
		t.Fatalf("%d rows, want the deleted one only", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE status = 'deleted'`); n != 1 {
		t.Fatal("the deleted thread was resurrected")
	}
}
