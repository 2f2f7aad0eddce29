// Package pgtest gives each test its own PostgreSQL database, cloned from a
// migrated template, so tests run in parallel without seeing each other's rows.
//
// The server comes from YUXI_TEST_DATABASE_URL (default: the local trust-auth
// server at 127.0.0.1:5432). When it cannot be reached the test is skipped —
// unless CI is set, in which case it fails: CI must never pass by skipping.
//
// Imported by: tests only. May import: shared/postgres, pgx, testing.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// DefaultURL is the admin connection used when YUXI_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL returns the server's admin connection string for tests.
func AdminURL() string {
	if u := os.Getenv("YUXI_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Unavailable skips the test locally, fails it under CI.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required under CI: %v", what, err)
	}
	t.Skipf("%s not available: %v", what, err)
}

// NewDatabase creates a fresh migrated database for t and drops it when t ends.
// It returns the pool and the database URL (for subprocesses).
func NewDatabase(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		Unavailable(t, "PostgreSQL", err)
	}
	defer admin.Close(context.Background())

	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("prepare template database: %v", err)
	}
	name := fmt.Sprintf("yuxi_test_%d_%s", time.Now().Unix(), randomHex(6))
	for i := 0; ; i++ {
		_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, tmpl))
		if err == nil {
			break
		}
		// Another session may be copying the template at this instant.
		if i < 50 && strings.Contains(err.Error(), "being accessed by other users") {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.Fatalf("create test database: %v", err)
	}
	dbURL := withDatabase(AdminURL(), name)
	pool, err := postgres.Open(ctx, dbURL, 20)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name))
	})
	return pool, dbURL
}

// ensureTemplate creates (once per schema version) a migrated template database.
func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	name := "yuxi_tmpl_" + schemaHash()
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7331)`); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock(7331)`) //nolint:errcheck
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	dropLeftovers(ctx, admin, name)
	if exists {
		// Refresh the mark that keeps other checkouts from dropping it.
		_, _ = admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %s IS 'created %d'`, name, time.Now().Unix()))
		return name, nil
	}
	build := name + "_build"
	_, _ = admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, build))
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, build)); err != nil {
		return "", err
	}
	pool, err := postgres.Open(ctx, withDatabase(AdminURL(), build), 2)
	if err != nil {
		return "", err
	}
	err = postgres.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, build, name)); err != nil {
		return "", err
	}
	_, _ = admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %s IS 'created %d'`, name, time.Now().Unix()))
	return name, nil
}

func schemaHash() string {
	h := sha256.New()
	for _, m := range postgres.MigrationSources() {
		h.Write([]byte(m))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
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

// dropLeftovers removes databases that killed test processes could not drop:
// test databases older than two hours and templates of older schemas.
func dropLeftovers(ctx context.Context, admin *pgx.Conn, currentTemplate string) {
	rows, err := admin.Query(ctx, `SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database WHERE datname LIKE 'yuxi_test_%' OR datname LIKE 'yuxi_tmpl_%'`)
	if err != nil {
		return
	}
	var stale []string
	cutoff := time.Now().Add(-2 * time.Hour).Unix()
	for rows.Next() {
		var n, comment string
		if rows.Scan(&n, &comment) != nil {
			continue
		}
		if strings.HasPrefix(n, "yuxi_tmpl_") {
			// Another checkout with another schema may be testing on its
			// template right now: only templates unused for two hours go.
			var made int64
			_, _ = fmt.Sscanf(comment, "created %d", &made)
			if n != currentTemplate && !strings.HasSuffix(n, "_build") && made < cutoff {
				stale = append(stale, n)
			}
			continue
		}
		var ts int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(n, "yuxi_test_"), "%d_", &ts); err == nil && ts > 0 && ts < cutoff {
			stale = append(stale, n)
		}
	}
	rows.Close()
	for _, n := range stale {
		_, _ = admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, n))
	}
}
