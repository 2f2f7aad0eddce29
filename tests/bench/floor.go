package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// commitFloor is the database floor of figures 1 and 2: one single-row
// INSERT in its own transaction, committed durably, on a one-column table
// without index or sequence, through pgx with the pool settings every
// function gets (shared/postgres.Open with the default size). It lives in
// the figure's own database.
type commitFloor struct {
	pool *pgxpool.Pool
	n    atomic.Int64
}

func openCommitFloor(ctx context.Context, dbURL string) (*commitFloor, error) {
	pool, err := postgres.Open(ctx, dbURL, 0)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (x bigint NOT NULL)`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create bench_floor: %w", err)
	}
	return &commitFloor{pool: pool}, nil
}

func (f *commitFloor) close() { f.pool.Close() }

// once runs BEGIN; INSERT; COMMIT and returns how long it took.
func (f *commitFloor) once(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	tx, err := f.pool.Begin(ctx)
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

// concurrently runs op perWorker times in each of workers goroutines, all
// started together, and returns every latency. It stops at the first error.
func concurrently(ctx context.Context, workers, perWorker int, op func(ctx context.Context, worker, i int) (time.Duration, error)) (samples, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		all      = make(samples, 0, workers*perWorker)
		firstErr error
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			local := make(samples, 0, perWorker)
			for i := range perWorker {
				d, err := op(ctx, w, i)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				local = append(local, d)
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return all, firstErr
}
