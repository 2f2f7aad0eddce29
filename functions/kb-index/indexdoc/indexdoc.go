// Package indexdoc is the handler of the kb-index function: it chunks a
// parsed file, embeds the chunks that are new (unchanged content keeps its
// chunk id and vector: embeddings are cached by content hash), writes the
// vectors, then replaces the file's chunks and keyword postings in one
// transaction and marks the file indexed, emitting io.yuxi.document.indexed.v1
// (for kb-graph) through the outbox in the same transaction. The new chunks'
// keyword analysis (kb.PrepareKeyword) runs while they are embedded, outside
// any transaction, so the commit only copies prepared rows in.
//
// The file's status moves parsed → indexing → indexed | error_indexing. The
// indexing stage is a lease on the file row (see parsedoc). A crash mid-file
// resumes: embedded batches are in the cache, vectors are upserted by chunk
// id, and nothing of the previous chunks is replaced until the final commit —
// a search never sees a half-replaced file.
//
// Imported by: functions/kb-index (main), infra/local, tests.
// May import: events, shared/* (not pgx: kb.Store owns the transactions).
package indexdoc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Vectors is the vector store.
type Vectors interface {
	EnsureCollection(ctx context.Context, name string, dim int) error
	Upsert(ctx context.Context, collection string, items []vector.Item) error
	Delete(ctx context.Context, collection string, ids []string) error
}

// Embedders builds a KB's embedder.
type Embedders interface {
	Embedder(spec string, dim int) (embed.Embedder, error)
}

// Notifier announces file status changes to watchers of a KB.
type Notifier = kb.Notifier

// Config tunes the handler.
type Config struct {
	Lease       time.Duration // indexing stage lease (default 15 min)
	Batch       int           // texts per embedding call (default 64)
	MaxAttempts int           // passing faults retried this often, then error_indexing (default 5)
	Crash       func(point string)
}

// Handler handles document.parsed.
type Handler struct {
	kbs       *kb.Store
	ob        kb.Outbox
	store     blob.Store
	kw        kb.KeywordWriter
	vectors   Vectors
	embedders Embedders
	stage     kb.Stage
	cfg       Config
	log       *slog.Logger
}

// New returns the handler. notify may be nil.
func New(kbs *kb.Store, ob kb.Outbox, store blob.Store, kw kb.KeywordWriter, vectors Vectors, embedders Embedders, notify Notifier, cfg Config, log *slog.Logger) *Handler {
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if log == nil {
		log = slog.Default()
	}
	return &Handler{kbs: kbs, ob: ob, store: store, kw: kw, vectors: vectors, embedders: embedders, cfg: cfg, log: log,
		stage: kb.Stage{Store: kbs, Notify: notify, MaxAttempts: cfg.MaxAttempts, Log: log}}
}

// Register adds the handler to a function router.
func (h *Handler) Register(r *faas.Router) { faas.On(r, h.Parsed) }

func (h *Handler) crash(point string) {
	if h.cfg.Crash != nil {
		h.cfg.Crash(point)
	}
}

// Parsed indexes one file.
func (h *Handler) Parsed(ctx context.Context, in events.DocumentParsed) error {
	f, err := h.kbs.ClaimIndex(ctx, in.FileID, h.cfg.Lease)
	switch {
	case errors.Is(err, kb.ErrFileNotFound), errors.Is(err, kb.ErrBusy), errors.Is(err, kb.ErrNotReady):
		return nil
	case err != nil:
		return err
	}
	h.stage.Status(ctx, f, kb.StatusIndexing, "")
	h.crash("index.claimed")
	if err := h.index(ctx, f); err != nil {
		if errors.Is(err, kb.ErrStageLost) {
			// The KB may be gone (deleted, perhaps purged, while this stage
			// wrote vectors for it): what it wrote is owed to the sweep.
			_, oerr := h.kbs.OwePurgeIfGone(ctx, f.KBID)
			return oerr
		}
		return h.stage.Fail(ctx, f, err)
	}
	h.stage.Status(ctx, f, kb.StatusIndexed, "")
	return nil
}

func (h *Handler) index(ctx context.Context, f kb.File) error {
	k, err := h.kbs.LoadSettings(ctx, f.KBID) // not Load: its file count would make ingestion grow with the square of the files
	if err != nil {
		return err
	}
	if f.MarkdownKey == nil {
		return failure.Unprocessable("not_parsed", "the file has no parsed Markdown")
	}
	rc, _, err := h.store.Get(ctx, *f.MarkdownKey)
	if errors.Is(err, blob.ErrNotFound) {
		return failure.Unprocessable("not_parsed", "the parsed Markdown is gone; parse the file again")
	}
	if err != nil {
		return err
	}
	md, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	ch, err := kb.ResolveChunking(k.AdditionalParams, f.Processing().Chunking)
	if err != nil {
		return err
	}
	em, err := h.embedders.Embedder(k.EmbeddingModelSpec, k.EmbeddingDim)
	if err != nil {
		return err
	}
	chunks, err := chunk.Split(ctx, ch.PresetID, string(md), ch.Config, chunk.Options{Filename: f.Filename, Embedder: em})
	if err != nil {
		return err
	}
	ids := chunk.ChunkIDs(f.FileID, chunks)
	indexed := make([]kb.IndexedChunk, len(chunks))
	for i, c := range chunks {
		indexed[i] = kb.IndexedChunk{ID: ids[i], Chunk: c}
	}
	existing, err := h.kbs.ExistingChunks(ctx, f.FileID)
	if err != nil {
		return err
	}
	// The keyword analysis of the new chunks (CPU) runs while they are
	// embedded (mostly waiting on the provider): the commit then only
	// copies rows in.
	prepared := make(chan kb.KeywordWriter, 1)
	go func() { prepared <- kb.PrepareKeyword(h.kw, indexed, existing) }()
	err = h.embedNew(ctx, k, em, f, indexed, existing)
	kw := <-prepared
	if err != nil {
		return err
	}
	h.crash("index.before_commit")
	removed, err := h.kbs.CommitIndex(ctx, h.ob, kw, f, indexed)
	if err != nil {
		return err
	}
	h.crash("index.after_commit")
	if len(removed) > 0 {
		if _, err := h.kbs.FlushVectorDeletes(ctx, h.vectors, f.KBID); err != nil {
			h.log.Warn("delete stale vectors (the sweep retries)", "kb", f.KBID, "error", err)
		}
	}
	return nil
}

// embedNew embeds the chunks the file did not have (by content-derived id),
// through the embedding cache, and upserts their vectors.
func (h *Handler) embedNew(ctx context.Context, k kb.KB, em embed.Embedder, f kb.File, chunks []kb.IndexedChunk, existing map[string]bool) error {
	var todo []kb.IndexedChunk
	for _, c := range chunks {
		if !existing[c.ID] {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if err := h.vectors.EnsureCollection(ctx, k.KBID, k.EmbeddingDim); err != nil {
		return err
	}
	for start := 0; start < len(todo); start += h.cfg.Batch {
		batch := todo[start:min(start+h.cfg.Batch, len(todo))]
		hashes := make([]string, len(batch))
		for i, c := range batch {
			hashes[i] = c.Chunk.ContentHash
		}
		cached, err := h.kbs.CachedEmbeddings(ctx, em.Model(), hashes)
		if err != nil {
			return err
		}
		var texts []string
		var missing []string
		for _, c := range batch {
			if _, ok := cached[c.Chunk.ContentHash]; !ok && !contains(missing, c.Chunk.ContentHash) {
				texts = append(texts, c.Chunk.Content)
				missing = append(missing, c.Chunk.ContentHash)
			}
		}
		if len(texts) > 0 {
			vecs, err := em.Embed(ctx, texts)
			if err != nil {
				return fmt.Errorf("embed chunks: %w", err)
			}
			if len(vecs) != len(texts) {
				return fmt.Errorf("embed chunks: %d vectors for %d texts", len(vecs), len(texts))
			}
			fresh := map[string][]float32{}
			for i, v := range vecs {
				if len(v) != k.EmbeddingDim {
					return failure.Unprocessable("embedding_dimension_mismatch", "model %s returned %d dimensions; the knowledge base expects %d",
						em.Model(), len(v), k.EmbeddingDim)
				}
				fresh[missing[i]] = v
				cached[missing[i]] = v
			}
			if err := h.kbs.CacheEmbeddings(ctx, em.Model(), fresh); err != nil {
				return err
			}
		}
		items := make([]vector.Item, len(batch))
		ids := make([]string, len(batch))
		for i, c := range batch {
			items[i] = vector.Item{ID: c.ID, Group: f.FileID, Vector: cached[c.Chunk.ContentHash]}
			ids[i] = c.ID
		}
		if err := h.kbs.RecordVectorWrites(ctx, f, ids); err != nil {
			return err
		}
		if err := h.vectors.Upsert(ctx, k.KBID, items); err != nil {
			return err
		}
		h.crash("index.batch_embedded")
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
