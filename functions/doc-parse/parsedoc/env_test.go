package parsedoc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// env is one test's world: its own migrated PostgreSQL database (pgtest), a
// local object store in a temporary directory, the real document parser,
// keyword index and vector engine, and one knowledge base. The outbox has no
// relay: events the handler emits stay in the outbox table, where the tests
// read them.
type env struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	kbs    *kb.Store
	lib    *kb.Library
	objs   *blob.Local
	ob     *outbox.Outbox
	kw     *keyword.Index
	vec    *vector.Postgres
	parser *docparse.Parser
	log    *slog.Logger // to the test's output, shown when it fails
	kb     kb.KB
}

var admin = access.Subject{UID: "owner", Role: "admin"}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	objs, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vec := vector.NewPostgres(pool, vector.PostgresOptions{})
	t.Cleanup(vec.Close)
	e := &env{
		ctx:    context.Background(),
		pool:   pool,
		kbs:    kb.NewStore(pool, "builtin:hash-ngram-256", func(string) (int, error) { return 256, nil }),
		objs:   objs,
		ob:     &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("doc-parse-test")}},
		kw:     keyword.New(pool, keyword.NewAnalyzer("simple"), keyword.Params{}),
		vec:    vec,
		parser: docparse.New(docparse.NewPDFTextLayer(), docparse.Options{OCREngine: docparse.EngineDisable}),
		log:    slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	e.lib = kb.NewLibrary(kb.LibraryDeps{Store: e.kbs, Objects: objs, Outbox: e.ob, Keyword: e.kw, Vectors: vec, Log: e.log})
	e.kb, err = e.kbs.Create(e.ctx, admin, kb.CreateInput{Name: "parse test"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// handler builds doc-parse's handler over e, as functions/doc-parse does.
func (e *env) handler(cfg parsedoc.Config) *parsedoc.Handler {
	return parsedoc.New(e.kbs, e.ob, e.objs, nil, e.parser, e.kw, e.vec, nil, cfg, e.log)
}

// upload stores content as an original and registers it as an uploaded file
// of e's KB, as POST …/documents does.
func (e *env) upload(t *testing.T, name, content string) kb.File {
	t.Helper()
	key := kb.UploadKey(e.kb.KBID, name, time.Now())
	if _, err := e.objs.Put(e.ctx, key, strings.NewReader(content), int64(len(content)), ""); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	var files []kb.File
	err := e.ob.Tx(e.ctx, e.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		files, err = e.kbs.AddFilesTx(e.ctx, tx, emit, e.kb.KBID, []kb.NewFile{{Filename: name, ObjectKey: key,
			ContentHash: hex.EncodeToString(sum[:]), Size: int64(len(content)), CreatedBy: admin.UID,
			Processing: kb.Processing{AutoIndex: true}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

// uploaded is the event intake emits for f.
func uploaded(f kb.File) events.DocumentUploaded {
	return events.DocumentUploaded{KBID: f.KBID, FileID: f.FileID}
}

func (e *env) load(t *testing.T, fileID string) kb.File {
	t.Helper()
	f, err := e.kbs.LoadFile(e.ctx, fileID)
	if err != nil {
		t.Fatalf("load file %s: %v", fileID, err)
	}
	return f
}

// exec runs a statement and fails the test on error.
func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(e.ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// events lists the types of the outbox events about fileID, oldest first.
func (e *env) events(t *testing.T, fileID string) []string {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT type FROM outbox WHERE data->>'file_id' = $1 ORDER BY id`, fileID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// object reads a stored object; ok is false when there is none.
func (e *env) object(t *testing.T, key string) (string, bool) {
	t.Helper()
	rc, _, err := e.objs.Get(e.ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// count runs a count query.
func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// wantEvents fails unless the events about fileID are want.
func (e *env) wantEvents(t *testing.T, fileID string, want ...string) {
	t.Helper()
	if got := e.events(t, fileID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events about %s = %v, want %v", fileID, got, want)
	}
}

var errStoreDown = errors.New("object store unavailable")

// failingGets is the object store during an outage of reads: Get fails with
// a passing fault, everything else works.
type failingGets struct{ *blob.Local }

func (failingGets) Get(context.Context, string) (io.ReadCloser, blob.Info, error) {
	return nil, blob.Info{}, errStoreDown
}
