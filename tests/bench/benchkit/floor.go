package benchkit

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// CommitFloor is the database floor of figures 1, 2 and 8: one single-row
// INSERT in its own transaction, committed durably, on a one-column table
// without index or sequence, through pgx with the pool settings every
// function gets (shared/postgres.Open with the default size). It lives in
// the figure's own database.
type CommitFloor struct {
	Pool *pgxpool.Pool
	n    atomic.Int64
}

// OpenCommitFloor opens a pool on dbURL and creates the floor's table.
func OpenCommitFloor(ctx context.Context, dbURL string) (*CommitFloor, error) {
	pool, err := postgres.Open(ctx, dbURL, 0)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (x bigint NOT NULL)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create bench_floor: %w", err)
	}
	return &CommitFloor{Pool: pool}, nil
}

// Close closes the floor's pool.
func (f *CommitFloor) Close() { f.Pool.Close() }

// Once runs BEGIN; INSERT; COMMIT and returns how long it took.
func (f *CommitFloor) Once(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	tx, err := f.Pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_floor(x) VALUES ($1)`, f.n.Add(1)); err != nil {
		_ = tx.Rollback(ctx)
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}
