package thread_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

func newStore(t *testing.T) (*thread.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	return thread.NewStore(pool), pool
}

func ptr[T any](v T) *T { return &v }

func code(err error) string {
	if err == nil {
		return ""
	}
	if fe, ok := failure.As(err); ok {
		return fe.Code
	}
	return "uncoded: " + err.Error()
}

func kind(err error) failure.Kind {
	if fe, ok := failure.As(err); ok {
		return fe.Kind
	}
	return failure.KindInternal
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func mustCreate(t *testing.T, s *thread.Store, uid string, in thread.CreateInput) thread.Thread {
	t.Helper()
	if in.AgentID == "" {
		in.AgentID = "default-chatbot"
	}
	th, err := s.Create(context.Background(), uid, in)
	if err != nil {
		t.Fatalf("create thread for %s: %v", uid, err)
	}
	return th
}
