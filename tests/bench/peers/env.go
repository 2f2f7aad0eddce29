package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// env is what both figures share: the server's admin connection (connected
// to the "postgres" database, so its statistics queries never count in a
// bench database), Redis, and the sample sizes.
type env struct {
	adminURL string
	redisURL string
	admin    *pgxpool.Pool
	rdb      *redis.Client
	log      io.Writer // progress, not part of the report
	sizes    sizes
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.log, "bench peers: "+format+"\n", args...)
}

// benchDB is a freshly created, migrated database used by one figure; the
// peers create their own schemas in it (dbos, river).
type benchDB struct {
	Name string
	URL  string
}

// newDatabase creates yuxi_bench_<random> and applies the product's
// migrations. The caller drops it with dropDatabase.
func (e *env) newDatabase(ctx context.Context) (benchDB, error) {
	name := "yuxi_bench_" + randomHex(6)
	if _, err := e.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return benchDB{}, fmt.Errorf("create database %s: %w", name, err)
	}
	db := benchDB{Name: name, URL: withDatabase(e.adminURL, name)}
	pool, err := postgres.Open(ctx, db.URL, 2)
	if err == nil {
		err = postgres.Migrate(ctx, pool)
		pool.Close()
	}
	if err != nil {
		e.dropDatabase(db)
		return benchDB{}, fmt.Errorf("migrate %s: %w", name, err)
	}
	return db, nil
}

func (e *env) dropDatabase(db benchDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		e.progress("drop database %s: %v", db.Name, err)
	}
}

func newPrefix() string { return "yuxibench:" + randomHex(6) + ":" }

// dropPrefix deletes every Redis key under prefix.
func (e *env) dropPrefix(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := e.rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			e.rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		e.rdb.Del(ctx, keys...)
	}
}

// platformEnv is the platform's environment on db and prefix (as in
// tests/bench): the provider "bench" only has to exist so that submissions
// accept its model spec; the figures swap in an in-process model.
func (e *env) platformEnv(db benchDB, prefix string) map[string]string {
	return map[string]string{
		"DATABASE_URL":                 db.URL,
		"REDIS_URL":                    e.redisURL,
		"YUXI_REDIS_PREFIX":            prefix,
		"YUXI_PROVIDER_BENCH_BASE_URL": "http://127.0.0.1:9/v1",
		"YUXI_DEFAULT_MODEL":           "bench:instant",
		"LOG_LEVEL":                    "warn",
	}
}

func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// dbCommits reads pg_stat_database.xact_commit and xact_rollback of the
// named database (from the admin connection, which is elsewhere).
func (e *env) dbCommits(ctx context.Context, name string) (commits, rollbacks int64, err error) {
	err = e.admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, name).
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

// commitFloor is figure 1's floor: BEGIN; INSERT one row; COMMIT (durable),
// through pgx with the pool settings every function gets.
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

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
