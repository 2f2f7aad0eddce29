package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// env is what every figure shares: the database server's admin connection
// (it creates and drops the bench databases and reads the statistics views;
// it is connected to the "postgres" database, so its own queries never count
// in a bench database), Redis, and the binaries built at start.
type env struct {
	adminURL string
	redisURL string
	admin    *pgxpool.Pool
	rdb      *redis.Client
	bins     map[string]string // function name (and "hello") → executable
	log      io.Writer         // progress, not part of the report

	selected    []string // the figures this run reports
	root        string   // the module's directory
	datasetsDir string   // YUXI_DATASETS_DIR: retrieval test sets (figure 5)
	// kbEnv is added to the knowledge fixture's environment (figures 5, 6):
	// YUXI_BENCH_EMBEDDING_MODEL (model id), _BASE_URL and _API_KEY of an
	// OpenAI-compatible /v1/embeddings provider; empty: the builtin embedder.
	kbEnv map[string]string
	kn    *knowledge // the knowledge-base fixture of figures 5 and 6, opened on first use
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.log, "bench: "+format+"\n", args...)
}

// benchDB is a freshly created, migrated database used by one figure.
type benchDB struct {
	Name string
	URL  string
}

// newDatabase creates yuxi_bench_<random> and applies the migrations (the
// code bootstrap.OpenCore runs). The caller drops it with dropDatabase.
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

// dropDatabase drops db, disconnecting whatever is still connected.
func (e *env) dropDatabase(db benchDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		e.progress("drop database %s: %v", db.Name, err)
	}
}

// newPrefix returns a Redis key prefix of its own for one figure.
func newPrefix() string { return "yuxibench:" + randomHex(6) + ":" }

// dropPrefix deletes every key under prefix.
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

// platformEnv is the environment of a platform process (or bootstrap.Load)
// on db and prefix. The model provider "bench" only has to exist so that run
// submission accepts its spec; nothing ever calls it (figure 1 swaps in an
// in-process model, the intake never calls models).
func (e *env) platformEnv(db benchDB, prefix string) map[string]string {
	return map[string]string{
		"DATABASE_URL":                 db.URL,
		"REDIS_URL":                    e.redisURL,
		"YUXI_REDIS_PREFIX":            prefix,
		"YUXI_PROVIDER_BENCH_BASE_URL": "http://127.0.0.1:9/v1",
		"YUXI_DEFAULT_MODEL":           "bench:instant",
		"LOG_LEVEL":                    "warn",
		"K_SINK":                       "http://127.0.0.1:9/",
	}
}

// envList turns an environment map into a sorted KEY=VALUE list.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
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
