package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// knowledge is the knowledge-base fixture of figures 5 and 6: a bench
// database with the knowledge engines opened as the kb-index function opens
// them (knowledge.Open: the keyword index, the Postgres vector store with its
// per-process cache, the embedders, an object store in a temporary
// directory), and the KBs built on it, each once per bench run. Figure 6
// reuses the SciFact KB figure 5 built. closeKnowledge removes it all.
type knowledge struct {
	db      benchkit.DB
	prefix  string
	blobDir string
	app     *benchApp
	sub     access.Subject

	mu    sync.Mutex
	built map[string]*building
	bg    sync.WaitGroup // builds started ahead of the figure that needs them
}

// building is a KB being built or built: done closes when c or err is set.
type building struct {
	done chan struct{}
	c    *corpusKB
	err  error
}

// corpusKB is a KB built from a corpus: one file per document.
type corpusKB struct {
	kb     kb.KB
	ds     *retrievaleval.Dataset // nil for the synthetic corpus
	docOf  map[string]string      // file id → corpus document id
	files  int
	chunks int
	took   time.Duration // register, parse stage and index, every file
}

// knowledge opens the fixture on first use.
func (e *env) knowledge(ctx context.Context) (*knowledge, error) {
	if e.kn != nil {
		return e.kn, nil
	}
	db, err := e.NewDatabase(ctx)
	if err != nil {
		return nil, err
	}
	// The fixture's commits need not wait for the WAL flush: what the
	// figures measure on it (rankings, read-only queries) does not depend on
	// it, and its KBs build about a fifth faster. Figure 7 measures
	// writes, on databases of its own with the server's settings.
	if _, err := e.Admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" SET synchronous_commit = off"); err != nil {
		e.DropDatabase(db)
		return nil, err
	}
	kn := &knowledge{db: db, prefix: benchkit.NewPrefix(), sub: access.Subject{UID: "bench", Role: "superadmin"}, built: map[string]*building{}}
	if kn.blobDir, err = os.MkdirTemp("", "yuxi-bench-blob-"); err != nil {
		e.DropDatabase(db)
		return nil, err
	}
	if kn.app, err = e.openKnowledgeApp(ctx, db, kn.prefix, kn.blobDir); err != nil {
		e.DropDatabase(db)
		_ = os.RemoveAll(kn.blobDir)
		return nil, err
	}
	e.kn = kn
	return kn, nil
}

// closeKnowledge drops the fixture (at the end of the run).
func (e *env) closeKnowledge() {
	if e.kn == nil {
		return
	}
	e.kn.bg.Wait()
	e.kn.app.Close()
	e.DropDatabase(e.kn.db)
	e.DropPrefix(e.kn.prefix)
	_ = os.RemoveAll(e.kn.blobDir)
	e.kn = nil
}

// openKnowledgeApp opens the platform's services on db as a function
// process does (bootstrap.Load, OpenCore, knowledge.Open), with the object store in
// blobDir and a publisher that drops events: the bench drives the handlers
// itself. A second App on the same database is what a second process sees:
// caches of its own, loaded on first use.
func (e *env) openKnowledgeApp(ctx context.Context, db benchkit.DB, prefix, blobDir string) (*benchApp, error) {
	penv := e.platformEnv(db, prefix)
	penv["YUXI_BLOB_URI"] = blobDir
	penv["YUXI_DB_MAX_CONNS"] = "12" // room for the fixture's concurrent builds; the default is max(4, CPUs)
	for k, v := range e.kbEnv {
		penv[k] = v
	}
	cfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		return nil, err
	}
	drop := outbox.PublisherFunc(func(context.Context, cloudevents.Event) error { return nil })
	return openApp(ctx, cfg, bootstrap.Options{Function: "kb-index", Publisher: drop})
}

// indexer is kb-index's handler built as functions/kb-index builds it,
// over the fixture's engines; batch is its embedding batch (0: default).
func (kn *knowledge) indexer(batch int) *indexdoc.Handler {
	k := kn.app.Knowledge
	return indexdoc.New(k.KBs, kn.app.Core.Outbox, k.Blob, k.Keyword, k.Vectors, k.Models, nil, indexdoc.Config{Batch: batch}, kn.app.Log)
}

// mdDoc is a document to ingest as a Markdown file.
type mdDoc struct {
	id       string // corpus document id
	filename string
	markdown string
}

// build creates KB name (additional_params as given) and ingests the
// documents load returns into it, once per run: later and concurrent calls
// get the same KB. load's dataset (nil for none) is what the KB is
// evaluated on.
func (kn *knowledge) build(ctx context.Context, e *env, name, additional string, load func() (*retrievaleval.Dataset, []mdDoc, error),
	batch, workers int) (*corpusKB, error) {
	kn.mu.Lock()
	b, ok := kn.built[name]
	if !ok {
		b = &building{done: make(chan struct{})}
		kn.built[name] = b
	}
	kn.mu.Unlock()
	if ok {
		select {
		case <-b.done:
			return b.c, b.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(b.done)
	ds, docs, err := load()
	if err != nil {
		b.err = err
		return nil, err
	}
	b.c, b.err = kn.create(ctx, e, name, additional, ds, docs, batch, workers)
	return b.c, b.err
}

func (kn *knowledge) create(ctx context.Context, e *env, name, additional string, ds *retrievaleval.Dataset, docs []mdDoc,
	batch, workers int) (*corpusKB, error) {
	in := kb.CreateInput{Name: name}
	if additional != "" {
		in.AdditionalParams = []byte(additional)
	}
	k, err := kn.app.Knowledge.KBs.Create(ctx, kn.sub, in)
	if err != nil {
		return nil, fmt.Errorf("create KB %s: %w", name, err)
	}
	e.Progress("ingesting %d files into KB %s (%s, %d at once)", len(docs), name, k.EmbeddingModelSpec, workers)
	t0 := time.Now()
	docOf, err := kn.ingest(ctx, kn.indexer(batch), k, docs, workers)
	if err != nil {
		return nil, fmt.Errorf("ingest %s: %w", name, err)
	}
	c := &corpusKB{kb: k, ds: ds, docOf: docOf, files: len(docs), took: time.Since(t0)}
	if err := kn.app.Pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_chunks WHERE kb_id = $1`, k.KBID).Scan(&c.chunks); err != nil {
		return nil, err
	}
	if c.kb, err = kn.app.Knowledge.KBs.Load(ctx, k.KBID); err != nil {
		return nil, err
	}
	return c, nil
}

// ingest registers docs as files of k (kb.Store.AddFilesTx, as POST …/documents
// does), runs each file's parse stage with its Markdown given (claim, store
// the Markdown, kb.Store.FinishParseTx: what doc-parse does after parsing) and then
// hands its document.parsed event to kb-index's handler, which chunks,
// embeds, writes the vectors and commits the chunks and the keyword index.
// workers files go through at once. Every file must end indexed.
func (kn *knowledge) ingest(ctx context.Context, h *indexdoc.Handler, k kb.KB, docs []mdDoc, workers int) (map[string]string, error) {
	pool := kn.app.Pool
	noEmit := func(...outbox.Pending) error { return nil } // the bench hands the events over itself
	files := make([]kb.File, 0, len(docs))
	for start := 0; start < len(docs); start += 1000 {
		batch := docs[start:min(start+1000, len(docs))]
		nfs := make([]kb.NewFile, len(batch))
		for i, d := range batch {
			nfs[i] = kb.NewFile{Filename: d.filename, ObjectKey: kb.UploadKey(k.KBID, d.filename, time.Unix(0, int64(start+i))),
				Size: int64(len(d.markdown)), ContentType: "text/markdown", CreatedBy: kn.sub.UID, Processing: kb.Processing{AutoIndex: true}}
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			fs, err := kn.app.Knowledge.KBs.AddFilesTx(ctx, tx, noEmit, k.KBID, nfs)
			files = append(files, fs...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	docOf := make(map[string]string, len(files))
	for i, f := range files {
		docOf[f.FileID] = docs[i].id
	}
	per := (len(files) + workers - 1) / workers
	_, err := benchkit.Concurrently(ctx, workers, per, func(ctx context.Context, w, i int) (time.Duration, error) {
		n := w*per + i
		if n >= len(files) {
			return 0, nil
		}
		return 0, kn.parseAndIndex(ctx, h, files[n], docs[n].markdown)
	})
	if err != nil {
		return nil, err
	}
	var indexed, total int
	var firstErr *string
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'indexed'), count(*),
		(SELECT status || ': ' || coalesce(error_message, '') FROM knowledge_files WHERE kb_id = $1 AND status <> 'indexed' LIMIT 1)
		FROM knowledge_files WHERE kb_id = $1`, k.KBID).Scan(&indexed, &total, &firstErr); err != nil {
		return nil, err
	}
	if indexed != len(files) || total != len(files) {
		msg := ""
		if firstErr != nil {
			msg = *firstErr
		}
		return nil, fmt.Errorf("%d of %d files indexed; first other: %s", indexed, total, msg)
	}
	return docOf, nil
}

// parseAndIndex takes one registered file through the parse stage with its
// Markdown given, then through kb-index's handler.
func (kn *knowledge) parseAndIndex(ctx context.Context, h *indexdoc.Handler, f kb.File, md string) error {
	pool := kn.app.Pool
	f, err := kn.app.Knowledge.KBs.ClaimParse(ctx, f.FileID, time.Hour)
	if err != nil {
		return fmt.Errorf("claim parse %s: %w", f.FileID, err)
	}
	key := kb.MarkdownKey(f.KBID, f.FileID)
	if _, err := kn.app.Knowledge.Blob.Put(ctx, key, strings.NewReader(md), int64(len(md)), "text/markdown; charset=utf-8"); err != nil {
		return err
	}
	noEmit := func(...outbox.Pending) error { return nil }
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return kn.app.Knowledge.KBs.FinishParseTx(ctx, tx, noEmit, f, key, nil) }); err != nil {
		return fmt.Errorf("finish parse %s: %w", f.FileID, err)
	}
	return h.Parsed(ctx, events.DocumentParsed{KBID: f.KBID, FileID: f.FileID})
}

// dataset loads a BEIR-layout test set: from YUXI_DATASETS_DIR, or from a
// shared/datasets or datasets directory next to an ancestor of the module.
func (e *env) dataset(name string) (*retrievaleval.Dataset, error) {
	var dirs []string
	if e.datasetsDir != "" {
		dirs = append(dirs, filepath.Join(e.datasetsDir, name))
	}
	for d := e.root; d != filepath.Dir(d); d = filepath.Dir(d) {
		dirs = append(dirs, filepath.Join(d, "shared", "datasets", name), filepath.Join(d, "datasets", name))
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "qrels", "test.tsv")); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return retrievaleval.Load(dir)
	}
	return nil, fmt.Errorf("dataset %s not found (set YUXI_DATASETS_DIR to the directory holding %s/)", name, name)
}

// corpusDocs turns a dataset's corpus into Markdown files, one per
// document: the title as a heading, then the text.
func corpusDocs(ds *retrievaleval.Dataset) []mdDoc {
	out := make([]mdDoc, len(ds.Corpus))
	for i, d := range ds.Corpus {
		md := d.Text + "\n"
		if d.Title != "" {
			md = "# " + d.Title + "\n\n" + md
		}
		out[i] = mdDoc{id: d.ID, filename: fmt.Sprintf("doc-%05d.md", i), markdown: md}
	}
	return out
}

// dataKB is the KB of a BEIR-layout dataset (one file per document, the
// KB's default chunking: about one chunk per SciFact abstract).
func (kn *knowledge) dataKB(ctx context.Context, e *env, name string) (*corpusKB, error) {
	return kn.build(ctx, e, name, "", func() (*retrievaleval.Dataset, []mdDoc, error) {
		ds, err := e.dataset(name)
		if err != nil {
			return nil, nil, err
		}
		return ds, corpusDocs(ds), nil
	}, 0, 4)
}

// synthetic is a KB of n chunks: SciFact's sentences, shuffled and joined
// two or three to a line, 2,000 lines per file, with the separator chunk
// preset (each line is its own chunk), indexed in embedding batches of 1,024.
func (kn *knowledge) synthetic(ctx context.Context, e *env, sci *retrievaleval.Dataset, n int) (*corpusKB, error) {
	return kn.build(ctx, e, fmt.Sprintf("synthetic-%d", n), `{"chunk_preset_id":"separator"}`, func() (*retrievaleval.Dataset, []mdDoc, error) {
		var sentences []string
		for _, d := range sci.Corpus {
			sentences = append(sentences, splitSentences(d.Text)...)
		}
		rng := rand.New(rand.NewPCG(5, 183))
		const perFile = 2000
		var docs []mdDoc
		var b strings.Builder
		for line := 0; line < n; line++ {
			k := 2 + rng.IntN(2)
			for j := range k {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(sentences[rng.IntN(len(sentences))])
			}
			b.WriteString("\n\n")
			if (line+1)%perFile == 0 || line == n-1 {
				docs = append(docs, mdDoc{id: fmt.Sprint(len(docs)), filename: fmt.Sprintf("part-%03d.md", len(docs)), markdown: b.String()})
				b.Reset()
			}
		}
		return nil, docs, nil
	}, 1024, 2)
}

// prefetchSynthetic builds the synthetic KB of n chunks in the background
// and then starts its HNSW graph build (the first vector search does), so
// that figure 6 finds both ready. Errors are kept for that figure.
func (kn *knowledge) prefetchSynthetic(ctx context.Context, e *env, n int) {
	kn.bg.Add(1)
	go func() {
		defer kn.bg.Done()
		sci, err := e.dataset("scifact")
		if err != nil {
			return
		}
		if c, err := kn.synthetic(ctx, e, sci, n); err == nil {
			_, _ = kn.query(ctx, c.kb, "vector", "warm up")
		}
	}()
}

// splitSentences cuts text after ". " when an upper-case letter or digit follows.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(text); i++ {
		if text[i] == '.' && text[i+1] == ' ' {
			c := text[i+2]
			if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				out = append(out, text[start:i+1])
				start = i + 2
			}
		}
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}
