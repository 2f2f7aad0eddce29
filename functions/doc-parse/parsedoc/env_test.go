package parsedoc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kb/kbtest"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// env is one test's world (kbtest.World: its own database, a local object
// store, the real keyword index and vector engine, one knowledge base) with
// the real document parser. Events the handler emits stay in the outbox
// table, where the tests read them.
type env struct {
	*kbtest.World
	parser *docparse.Parser
}

var admin = kbtest.Admin

func newEnv(t *testing.T) *env {
	t.Helper()
	w := kbtest.New(t, "doc-parse-test", "parse test")
	return &env{World: w,
		parser: docparse.New(docparse.NewPDFTextLayer(), docparse.Options{OCREngine: docparse.EngineDisable})}
}

// handler builds doc-parse's handler over e, as functions/doc-parse does.
func (e *env) handler(cfg parsedoc.Config) *parsedoc.Handler {
	return parsedoc.New(e.KBs, e.Outbox, e.Objs, nil, e.parser, e.Keyword, e.Vectors, nil, cfg, e.Log)
}

// upload stores content as an original and registers it as an uploaded file
// of e's KB, as POST …/documents does.
func (e *env) upload(t *testing.T, name, content string) kb.File {
	t.Helper()
	key := kb.UploadKey(e.KB.KBID, name, time.Now())
	if _, err := e.Objs.Put(e.Ctx, key, strings.NewReader(content), int64(len(content)), ""); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	var files []kb.File
	err := e.Outbox.Tx(e.Ctx, e.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		files, err = e.KBs.AddFilesTx(e.Ctx, tx, emit, e.KB.KBID, []kb.NewFile{{Filename: name, ObjectKey: key,
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

func (e *env) load(t *testing.T, fileID string) kb.File { return e.Load(t, fileID) }

func (e *env) exec(t *testing.T, sql string, args ...any) { e.Exec(t, sql, args...) }

// events lists the types of the outbox events about fileID, oldest first.
func (e *env) events(t *testing.T, fileID string) []string {
	return e.Strings(t, `SELECT type FROM outbox WHERE data->>'file_id' = $1 ORDER BY id`, fileID)
}

// object reads a stored object; ok is false when there is none.
func (e *env) object(t *testing.T, key string) (string, bool) {
	t.Helper()
	rc, _, err := e.Objs.Get(e.Ctx, key)
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

func (e *env) count(t *testing.T, sql string, args ...any) int { return e.Count(t, sql, args...) }

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
