package thread_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// Another user's thread is indistinguishable from a missing one, and nothing
// another user does changes it.
func TestOtherUsersThreadIsNotFound(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	th := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("Alice's")})

	if got, err := s.Get(ctx, "bob", th.ID); !errors.Is(err, thread.ErrNotFound) || code(err) != "thread_not_found" {
		t.Fatalf("bob gets alice's thread: %+v %v", got, err)
	}
	if got, err := s.Update(ctx, "bob", th.ID, thread.UpdateInput{Title: ptr("Bob's now"), IsPinned: ptr(true)}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob updates alice's thread: %+v %v", got, err)
	}
	if err := s.Delete(ctx, "bob", th.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob deletes alice's thread: %v", err)
	}
	if h, err := s.History(ctx, "bob", th.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob reads alice's history: %v %v", h, err)
	}
	if l, err := s.List(ctx, "bob", "", 0, 0); err != nil || len(l) != 0 {
		t.Fatalf("bob's list: %+v %v", l, err)
	}
	err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
		_, err := thread.Lock(ctx, tx, "bob", th.ID)
		return err
	})
	if !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob locks alice's thread: %v", err)
	}

	after, err := s.Get(ctx, "alice", th.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Title != "Alice's" || after.IsPinned || !after.UpdatedAt.Equal(th.UpdatedAt) {
		t.Fatalf("alice's thread changed: %+v", after)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE thread_id = $1 AND status = 'active' AND uid = 'alice'`, th.ID); n != 1 {
		t.Fatal("alice's thread is no longer active")
	}
	if _, err := s.Get(ctx, "alice", "0123456789abcdef0123456789abcdef"); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestUpdateAndDeleteOwnThread(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	th := mustCreate(t, s, "alice", thread.CreateInput{Title: ptr("Old")})

	u, err := s.Update(ctx, "alice", th.ID, thread.UpdateInput{Title: ptr("  New  ")})
	if err != nil || u.Title != "New" || u.IsPinned || u.UpdatedAt.Before(th.UpdatedAt) {
		t.Fatalf("rename: %+v %v", u, err)
	}
	u, err = s.Update(ctx, "alice", th.ID, thread.UpdateInput{IsPinned: ptr(true)})
	if err != nil || u.Title != "New" || !u.IsPinned {
		t.Fatalf("pin keeps the title: %+v %v", u, err)
	}
	if _, err := s.Update(ctx, "alice", th.ID, thread.UpdateInput{Title: ptr(strings.Repeat("t", 501))}); kind(err) != failure.KindUnprocessable || code(err) != "invalid_thread" {
		t.Fatalf("long title: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE thread_id = $1 AND title = 'New' AND is_pinned`, th.ID); n != 1 {
		t.Fatal("stored row does not match the updates")
	}

	if err := s.Delete(ctx, "alice", th.ID); err != nil {
		t.Fatal(err)
	}
	// Soft delete: the row stays, hidden from every read.
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE thread_id = $1 AND status = 'deleted'`, th.ID); n != 1 {
		t.Fatal("delete is not a soft delete")
	}
	if _, err := s.Get(ctx, "alice", th.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := s.Update(ctx, "alice", th.ID, thread.UpdateInput{Title: ptr("back")}); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("update deleted: %v", err)
	}
	if err := s.Delete(ctx, "alice", th.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := s.History(ctx, "alice", th.ID); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("history of deleted: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM conversations WHERE thread_id = $1 AND title = 'New'`, th.ID); n != 1 {
		t.Fatal("update of a deleted thread changed it")
	}
}
