// Package kbtest is a test fixture for the knowledge-base stages: one test's
// world of a fresh migrated database (pgtest), a local object store in a
// temporary directory, the real keyword index and vector engine, the kb
// store and Library, and one knowledge base. Its outbox has no relay: events
// stay in the outbox table, where tests read them.
//
// Imported by: tests only (functions/doc-parse/parsedoc, functions/kb-index/indexdoc).
// May import: events, shared/*, pgx, testing.
package kbtest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Admin owns the world's knowledge bases.
var Admin = access.Subject{UID: "owner", Role: "admin"}

// World is one test's knowledge-base world.
type World struct {
	Ctx     context.Context
	Pool    *pgxpool.Pool
	KBs     *kb.Store
	Lib     *kb.Library
	Objs    *blob.Local
	Outbox  *outbox.Outbox
	Keyword *keyword.Index
	Vectors *vector.Postgres
	Log     *slog.Logger // to the test's output, shown when it fails
	KB      kb.KB        // a knowledge base named kbName, owned by Admin
}

// New builds the world; source names the events' source ("/yuxi/<source>").
func New(t *testing.T, source, kbName string) *World {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	objs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vec := vector.NewPostgres(pool, vector.PostgresOptions{})
	t.Cleanup(vec.Close)
	w := &World{
		Ctx:     context.Background(),
		Pool:    pool,
		KBs:     kb.NewStore(pool, "builtin:hash-ngram-256", func(string) (int, error) { return 256, nil }),
		Objs:    objs,
		Outbox:  &outbox.Outbox{Writer: outbox.Writer{Source: events.Source(source)}},
		Keyword: keyword.New(pool, keyword.NewAnalyzer("simple"), keyword.Params{}),
		Vectors: vec,
		Log:     slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	w.Lib = kb.NewLibrary(kb.LibraryDeps{Store: w.KBs, Objects: objs, Outbox: w.Outbox, Keyword: w.Keyword, Vectors: vec, Log: w.Log})
	w.KB = w.CreateKB(t, kb.CreateInput{Name: kbName})
	return w
}

// CreateKB creates a knowledge base owned by Admin.
func (w *World) CreateKB(t testing.TB, in kb.CreateInput) kb.KB {
	t.Helper()
	k, err := w.KBs.Create(w.Ctx, Admin, in)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Load reads a file's row.
func (w *World) Load(t testing.TB, fileID string) kb.File {
	t.Helper()
	f, err := w.KBs.LoadFile(w.Ctx, fileID)
	if err != nil {
		t.Fatalf("load file %s: %v", fileID, err)
	}
	return f
}

// Exec runs a statement and fails the test on error.
func (w *World) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := w.Pool.Exec(w.Ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Count runs a query of one integer.
func (w *World) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := w.Pool.QueryRow(w.Ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Strings runs a query of one text column, in its order.
func (w *World) Strings(t testing.TB, sql string, args ...any) []string {
	t.Helper()
	rows, err := w.Pool.Query(w.Ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
