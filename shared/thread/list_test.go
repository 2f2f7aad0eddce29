package thread_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/thread"
)

func ids(list []thread.Thread) []string {
	out := make([]string, len(list))
	for i, th := range list {
		out[i] = th.ID
	}
	return out
}

func TestListOrderPagingAndFilters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	a := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("a")})
	b := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("b"), AgentID: "researcher"})
	c := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("c")})
	d := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("d")})
	mustCreate(t, s, "bob", thread.CreateInput{Title: ptr("bob's")})

	list := func(agentID string, limit, offset int) []string {
		t.Helper()
		l, err := s.List(ctx, "alice", agentID, limit, offset)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range l {
			if th.UID != "alice" {
				t.Fatalf("alice's list has %s's thread", th.UID)
			}
		}
		return ids(l)
	}
	want := func(got []string, want ...thread.Thread) {
		t.Helper()
		w := ids(want)
		if len(w) == 0 {
			w = []string{}
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("order = %v, want %v", got, w)
		}
	}

	// Newest update first.
	want(list("", 0, 0), d, c, b, a)
	// Updating a thread moves it to the top.
	if _, err := s.Update(ctx, "alice", a.ID, thread.UpdateInput{Title: ptr("a2")}); err != nil {
		t.Fatal(err)
	}
	want(list("", 0, 0), a, d, c, b)
	// Pinned threads come first, then by update time; pinning is an update.
	if _, err := s.Update(ctx, "alice", b.ID, thread.UpdateInput{IsPinned: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", c.ID, thread.UpdateInput{IsPinned: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	want(list("", 0, 0), c, b, a, d)
	// A later update of an unpinned thread does not pass a pinned one.
	if _, err := s.Update(ctx, "alice", d.ID, thread.UpdateInput{Title: ptr("d2")}); err != nil {
		t.Fatal(err)
	}
	want(list("", 0, 0), c, b, d, a)

	// Paging.
	want(list("", 2, 0), c, b)
	want(list("", 2, 2), d, a)
	want(list("", 2, 4))
	want(list("", 3, 1), b, d, a)
	// Out-of-range values fall back to the defaults (limit 100, offset 0).
	want(list("", -1, -5), c, b, d, a)
	want(list("", 501, 0), c, b, d, a)

	// Agent filter.
	want(list("researcher", 0, 0), b)
	want(list("default-chatbot", 0, 0), c, d, a)
	want(list("nobody", 0, 0))

	// Deleted threads are hidden.
	if err := s.Delete(ctx, "alice", c.ID); err != nil {
		t.Fatal(err)
	}
	want(list("", 0, 0), b, d, a)
	want(list("", 1, 0), b)

	l, _ := s.List(ctx, "alice", "", 0, 0)
	for _, th := range l {
		if th.ThreadStatus != "done" || th.CreatedAt.IsZero() || string(th.Metadata) != "{}" {
			t.Errorf("listed thread %+v", th)
		}
	}
}

func TestListLimitCapsAtFiveHundred(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO conversations (thread_id, uid, agent_id, title)
		SELECT 't' || i, 'alice', 'default-chatbot', 'bulk' FROM generate_series(1, 501) i`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ limit, want int }{{500, 500}, {0, 100}, {501, 100}, {7, 7}} {
		l, err := s.List(ctx, "alice", "", tc.limit, 0)
		if err != nil || len(l) != tc.want {
			t.Errorf("limit %d: %d threads (%v), want %d", tc.limit, len(l), err, tc.want)
		}
	}
}
