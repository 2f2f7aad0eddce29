package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// env is what both figures share: benchkit's environment (the server's
// admin connection, connected to the "postgres" database so that its
// statistics queries never count in a bench database, Redis, the bench
// databases and prefixes) and the sample sizes.
type env struct {
	*benchkit.Env
	sizes sizes
}

// dbCommits reads pg_stat_database.xact_commit and xact_rollback of the
// named database (from the admin connection, which is elsewhere).
func (e *env) dbCommits(ctx context.Context, name string) (commits, rollbacks int64, err error) {
	err = e.Admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, name).
		Scan(&commits, &rollbacks)
	if err != nil {
		return 0, 0, fmt.Errorf("read pg_stat_database for %s: %w", name, err)
	}
	return commits, rollbacks, nil
}

// flushStats makes every idle connection of the pools publish its pending
// statistics (pg_stat_force_next_flush, PostgreSQL ≥ 15; a backend
// otherwise publishes lazily, see tests/bench/pgstats.go) and returns how
// many statements that took: each is one committed transaction the caller
// subtracts. Connections held for good (DBOS's LISTEN connection) are
// skipped: they run no transactions after their LISTEN.
func flushStats(ctx context.Context, pools ...*pgxpool.Pool) (int, error) {
	n := 0
	for _, p := range pools {
		for deadline := time.Now().Add(time.Second); p.Stat().AcquiredConns() > 1 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		for _, c := range p.AcquireAllIdle(ctx) {
			_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			c.Release()
			if err != nil {
				return n, fmt.Errorf("flush statistics: %w", err)
			}
			n++
		}
	}
	return n, nil
}
