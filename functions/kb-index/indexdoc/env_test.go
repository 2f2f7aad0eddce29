package indexdoc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/kb/kbtest"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// env is one test's world (kbtest.World: its own database, a local object
// store, the real keyword index and vector engine, one knowledge base) with
// the offline builtin embedder. Events stay in the outbox table.
type env struct {
	*kbtest.World
	em *embedders
}

var admin = kbtest.Admin

func newEnv(t *testing.T) *env {
	t.Helper()
	w := kbtest.New(t, "kb-index-test", "index test")
	return &env{World: w, em: &embedders{}}
}

func (e *env) createKB(t *testing.T, in kb.CreateInput) kb.KB { return e.CreateKB(t, in) }

// handler builds kb-index's handler over e, as functions/kb-index does.
func (e *env) handler(cfg indexdoc.Config) *indexdoc.Handler {
	return indexdoc.New(e.KBs, e.Outbox, e.Objs, e.Keyword, e.Vectors, e.em, nil, cfg, e.Log)
}

// parsed registers a file of kbID and takes it through the parse stage with
// md as its Markdown (stored at kb.MarkdownKey), as doc-parse does.
func (e *env) parsed(t *testing.T, kbID, name, md string) kb.File {
	t.Helper()
	sum := sha256.Sum256([]byte(md))
	var files []kb.File
	err := e.Outbox.Tx(e.Ctx, e.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		files, err = e.KBs.AddFilesTx(e.Ctx, tx, emit, kbID, []kb.NewFile{{Filename: name,
			ObjectKey: kb.UploadKey(kbID, name, time.Now()), ContentHash: hex.EncodeToString(sum[:]), Size: int64(len(md)),
			CreatedBy: admin.UID, Processing: kb.Processing{AutoIndex: true}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.KBs.ClaimParse(e.Ctx, files[0].FileID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := kb.MarkdownKey(kbID, f.FileID)
	if _, err := e.Objs.Put(e.Ctx, key, strings.NewReader(md), int64(len(md)), "text/markdown; charset=utf-8"); err != nil {
		t.Fatal(err)
	}
	if err := e.Lib.FinishParse(e.Ctx, f, key, nil); err != nil {
		t.Fatal(err)
	}
	return e.load(t, f.FileID)
}

// parsedEvent is the event doc-parse emits for f.
func parsedEvent(f kb.File) events.DocumentParsed {
	return events.DocumentParsed{KBID: f.KBID, FileID: f.FileID}
}

func (e *env) load(t *testing.T, fileID string) kb.File { return e.Load(t, fileID) }

func (e *env) exec(t *testing.T, sql string, args ...any) { e.Exec(t, sql, args...) }

func (e *env) count(t *testing.T, sql string, args ...any) int { return e.Count(t, sql, args...) }

func (e *env) strings(t *testing.T, sql string, args ...any) []string {
	return e.Strings(t, sql, args...)
}

// chunkIDs lists fileID's chunks, by id.
func (e *env) chunkIDs(t *testing.T, fileID string) []string {
	return e.strings(t, `SELECT chunk_id FROM knowledge_chunks WHERE file_id = $1 ORDER BY chunk_id`, fileID)
}

// vectorIDs lists the vectors stored for fileID in kbID's collection, by id.
func (e *env) vectorIDs(t *testing.T, kbID, fileID string) []string {
	return e.strings(t, `SELECT id FROM vector_items WHERE collection = $1 AND grp = $2 ORDER BY id`, kbID, fileID)
}

// keywordIDs lists the documents of kbID's keyword index, by id.
func (e *env) keywordIDs(t *testing.T, kbID string) []string {
	return e.strings(t, `SELECT d.doc_id FROM keyword_docs d JOIN keyword_indexes i USING (index_no)
		WHERE i.index_id = $1 ORDER BY d.doc_id`, kbID)
}

func (e *env) indexVersion(t *testing.T, kbID string) int {
	return e.count(t, `SELECT index_version FROM knowledge_bases WHERE kb_id = $1`, kbID)
}

// embedders is the model registry of kb-index over the offline builtin
// embedder ("builtin:hash-ngram-<dim>"), counting the texts it embeds. When
// fail is set, embedding fails with it: the embedding service down.
type embedders struct {
	texts atomic.Int64
	fail  atomic.Pointer[error]
}

func (m *embedders) Embedder(spec string, _ int) (embed.Embedder, error) {
	d, ok := strings.CutPrefix(spec, "builtin:hash-ngram-")
	n, err := strconv.Atoi(d)
	if !ok || err != nil {
		return nil, failure.Unprocessable("unknown_model", "no embedding model %s", spec)
	}
	return counting{embed.NewHashing(n), m}, nil
}

type counting struct {
	*embed.Hashing
	m *embedders
}

func (c counting) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := c.m.fail.Load(); err != nil {
		return nil, *err
	}
	c.m.texts.Add(int64(len(texts)))
	return c.Hashing.Embed(ctx, texts)
}

// document is Markdown long enough for several chunks of the default
// chunking, each section about one harbour.
func document(harbours ...string) string {
	var b strings.Builder
	for _, h := range harbours {
		fmt.Fprintf(&b, "# %s\n\n", h)
		for i := range 40 {
			fmt.Fprintf(&b, "Line %d of the %s pilot notes: the tide at %s turns with the moon, and the pilots of %s wait for slack water. ", i, h, h, h)
		}
		b.WriteString("\n\n")
	}
	return b.String()
}
