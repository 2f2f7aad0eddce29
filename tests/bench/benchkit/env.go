package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Default service URLs: the local trust-auth PostgreSQL server and Redis.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// ServiceURLs reads YUXI_BENCH_DATABASE_URL (the server's admin
// connection) and YUXI_BENCH_REDIS_URL, each defaulting to the local server.
func ServiceURLs(getenv func(string) string) (adminURL, redisURL string) {
	return or(getenv("YUXI_BENCH_DATABASE_URL"), DefaultDatabaseURL), or(getenv("YUXI_BENCH_REDIS_URL"), DefaultRedisURL)
}

// Env is what every figure shares: the database server's admin connection
// (it creates and drops the bench databases and reads the statistics views;
// it is connected to the "postgres" database, so its own queries never count
// in a bench database) and Redis.
type Env struct {
	AdminURL string
	RedisURL string
	Admin    *pgxpool.Pool
	Redis    *redis.Client
	Log      io.Writer // progress, not part of the report
	name     string    // the program, prefixed to progress lines
}

// Open connects to PostgreSQL at adminURL and Redis at redisURL. name
// prefixes the progress lines written to log ("bench: …"). The caller
// closes the Env.
func Open(ctx context.Context, name, adminURL, redisURL string, log io.Writer) (*Env, error) {
	admin, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL %s: %w", adminURL, err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("PostgreSQL %s: %w", adminURL, err)
	}
	ropt, err := redis.ParseURL(redisURL)
	if err != nil {
		admin.Close()
		return nil, fmt.Errorf("Redis %s: %w", redisURL, err)
	}
	rdb := redis.NewClient(ropt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		admin.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("Redis %s: %w", redisURL, err)
	}
	return &Env{AdminURL: adminURL, RedisURL: redisURL, Admin: admin, Redis: rdb, Log: log, name: name}, nil
}

// Close closes the admin connection and Redis.
func (e *Env) Close() {
	e.Admin.Close()
	_ = e.Redis.Close()
}

// Progress writes a progress line ("<name>: …") to the log.
func (e *Env) Progress(format string, args ...any) {
	fmt.Fprintf(e.Log, e.name+": "+format+"\n", args...)
}

// Describe names the machine and the services the figures were measured on.
func (e *Env) Describe(ctx context.Context) string {
	var pg string
	_ = e.Admin.QueryRow(ctx, `SHOW server_version`).Scan(&pg)
	rv := "?"
	if info, err := e.Redis.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				rv = v
			}
		}
	}
	return fmt.Sprintf("%s %s/%s, %d CPUs, PostgreSQL %s, Redis %s", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), pg, rv)
}

// DB is a freshly created, migrated database used by one figure.
type DB struct {
	Name string
	URL  string
}

// NewDatabase creates yuxi_bench_<random> and applies the migrations (the
// code bootstrap.OpenCore runs). The caller drops it with DropDatabase.
func (e *Env) NewDatabase(ctx context.Context) (DB, error) {
	name := "yuxi_bench_" + RandomHex(6)
	if _, err := e.Admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return DB{}, fmt.Errorf("create database %s: %w", name, err)
	}
	db := DB{Name: name, URL: withDatabase(e.AdminURL, name)}
	pool, err := postgres.Open(ctx, db.URL, 2)
	if err == nil {
		err = postgres.Migrate(ctx, pool)
		pool.Close()
	}
	if err != nil {
		e.DropDatabase(db)
		return DB{}, fmt.Errorf("migrate %s: %w", name, err)
	}
	return db, nil
}

// DropDatabase drops db, disconnecting whatever is still connected.
func (e *Env) DropDatabase(db DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		e.Progress("drop database %s: %v", db.Name, err)
	}
}

// Scratch gives a figure a database (NewDatabase) and a Redis key prefix
// (NewPrefix) of its own; drop removes the keys, then the database.
func (e *Env) Scratch(ctx context.Context) (db DB, prefix string, drop func(), err error) {
	db, err = e.NewDatabase(ctx)
	if err != nil {
		return DB{}, "", nil, err
	}
	prefix = NewPrefix()
	return db, prefix, func() { e.DropPrefix(prefix); e.DropDatabase(db) }, nil
}

// NewPrefix returns a Redis key prefix of its own for one figure.
func NewPrefix() string { return "yuxibench:" + RandomHex(6) + ":" }

// DropPrefix deletes every Redis key under prefix.
func (e *Env) DropPrefix(prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := e.Redis.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			e.Redis.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		e.Redis.Del(ctx, keys...)
	}
}

// PlatformEnv is the environment of the platform (a process, or
// bootstrap.Load) on db and prefix. The model provider "bench" only has to
// exist so that run submission accepts its spec; nothing ever calls it (the
// figures swap in an in-process model, the intake never calls models). It
// names no event sink: callers that need one add K_SINK.
func (e *Env) PlatformEnv(db DB, prefix string) map[string]string {
	return map[string]string{
		"DATABASE_URL":                 db.URL,
		"REDIS_URL":                    e.RedisURL,
		"YUXI_REDIS_PREFIX":            prefix,
		"YUXI_PROVIDER_BENCH_BASE_URL": "http://127.0.0.1:9/v1",
		"YUXI_DEFAULT_MODEL":           "bench:instant",
		"LOG_LEVEL":                    "warn",
	}
}

// EnvList turns an environment map into a sorted KEY=VALUE list.
func EnvList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// RandomHex returns n random bytes in hex (names of bench databases, keys, rows).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + name
	return u.String()
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
