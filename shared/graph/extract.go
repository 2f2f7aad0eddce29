package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// Model is what extraction needs of a chat model (llm.ChatModel).
type Model interface {
	Stream(ctx context.Context, req llm.Request, onDelta func(llm.Delta) error) (llm.Response, error)
}

// Schema is a knowledge base's extraction schema: the entity and relation
// types the model is asked to use (empty: any).
type Schema struct {
	EntityTypes   []string `json:"entity_types"`
	RelationTypes []string `json:"relation_types"`
	// Version is the extractor configuration's version the extraction runs
	// under: chunks are marked done only while it is current (0: no check).
	Version int64 `json:"-"`
}

// ChunkText is a chunk to extract from.
type ChunkText struct {
	ID      string
	Content string
}

// Prompt is the fixed system prompt of extraction.
const Prompt = `You extract a knowledge graph from one text chunk.
Return only a JSON object: {"entities":[{"name":"…","type":"…","description":"…"}],"relations":[{"source":"entity name","target":"entity name","type":"…","description":"…"}]}.
Use the entity and relation types listed by the user when given; name entities as they appear in the text; relations connect listed entities. Return {"entities":[],"relations":[]} when the chunk states no facts.`

// Extractor extracts the graph of a file's chunks with a model and writes
// it to an engine, recording per-chunk progress in Postgres
// (graph_chunk_extractions, owned here).
type Extractor struct {
	pool   *pgxpool.Pool
	engine Engine
	// Tries is how often one delivery tries a chunk (default 3, with a
	// short backoff); MaxAttempts is how many failed deliveries a chunk gets
	// before it is left failed and skipped (default 5; the graph-build
	// routes show it; a reset or a configuration change clears it).
	Tries       int
	MaxAttempts int
	// Backoff is the wait before try n (default 200ms·n).
	Backoff func(n int) time.Duration
	// Crash is called at named crash points (tests): "graph.chunk_extracted"
	// after a chunk is written and marked done.
	Crash func(point string)
}

// NewExtractor returns an extractor writing to engine, its progress in pool.
func NewExtractor(pool *pgxpool.Pool, engine Engine) *Extractor {
	return &Extractor{pool: pool, engine: engine, Tries: 3, MaxAttempts: 5,
		Backoff: func(n int) time.Duration { return time.Duration(n) * 200 * time.Millisecond }}
}

// ExtractResult counts what ExtractFile did.
type ExtractResult struct {
	Extracted int // chunks extracted now
	Skipped   int // chunks whose content was already extracted
	Removed   int // chunks of the file that no longer exist (their graph removed)
	Failed    int // chunks whose extraction failed this time
	// Superseded: chunks extracted under a configuration version that a
	// reset replaced meanwhile (their graph removed, not marked done).
	Superseded int
	GaveUp     int // chunks left failed after MaxAttempts deliveries (not tried)
}

// ExtractFile brings the graph of file fileID up to date with chunks (the
// file's current chunks; their ids are content-addressed): chunks already
// extracted are skipped, chunks the file no longer has lose their mentions,
// and the rest are extracted by model, at most concurrency at a time, each
// written to the engine and then marked done. It is idempotent and
// resumable: after a crash or a redelivery only chunks not marked done are
// extracted again (an extraction written but not yet marked is written
// again, with the same ids). A chunk that fails is recorded with its error
// and ExtractFile returns an error naming how many failed, so the caller's
// delivery is retried; done chunks are kept.
func (x *Extractor) ExtractFile(ctx context.Context, kbID, fileID string, chunks []ChunkText, schema Schema, model Model, modelID string, concurrency int) (ExtractResult, error) {
	var res ExtractResult
	if concurrency <= 0 {
		concurrency = 4
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	rows, err := x.pool.Query(ctx, `SELECT chunk_id, status, attempts FROM graph_chunk_extractions WHERE kb_id = $1 AND file_id = $2`, kbID, fileID)
	if err != nil {
		return res, fmt.Errorf("load extraction progress: %w", err)
	}
	done := map[string]bool{}
	gaveUp := map[string]bool{}
	var stale []string
	current := make(map[string]bool, len(ids))
	for _, id := range ids {
		current[id] = true
	}
	for rows.Next() {
		var id, status string
		var attempts int
		if err := rows.Scan(&id, &status, &attempts); err != nil {
			rows.Close()
			return res, err
		}
		if !current[id] {
			stale = append(stale, id)
		} else if status == "done" {
			done[id] = true
		} else if x.MaxAttempts > 0 && attempts >= x.MaxAttempts {
			gaveUp[id] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, err
	}
	if len(stale) > 0 {
		if err := x.engine.RemoveChunks(ctx, kbID, stale); err != nil {
			return res, err
		}
		if _, err := x.pool.Exec(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1 AND chunk_id = ANY($2)`, kbID, stale); err != nil {
			return res, err
		}
		res.Removed = len(stale)
	}
	var todo []ChunkText
	for _, c := range chunks {
		if done[c.ID] {
			res.Skipped++
		} else if gaveUp[c.ID] {
			res.GaveUp++
		} else {
			todo = append(todo, c)
		}
	}
	// Workers ask the model (at most concurrency at a time); one writer
	// commits what they found, batching whatever is ready when it is free
	// (group commit: a slow write gathers a bigger batch, an idle writer
	// commits each chunk at once). Workers go on extracting while a batch is
	// being written, into a buffer of one batch: with fast extraction
	// (small models, cached replies) commits then carry up to maxWriteBatch
	// chunks instead of the few in flight. A crash loses at most the
	// extractions in flight, the buffer and the batch being written — never
	// progress already marked done (see commit), so a resumed run redoes
	// only those.
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		sem   = make(chan struct{}, concurrency)
		found = make(chan ChunkGraph, maxWriteBatch)
		fatal error
	)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		for g := range found {
			batch := []ChunkGraph{g}
		drain:
			for len(batch) < maxWriteBatch {
				select {
				case more, ok := <-found:
					if !ok {
						break drain
					}
					batch = append(batch, more)
				default:
					break drain
				}
			}
			n, err := x.commit(ctx, kbID, fileID, batch, schema.Version)
			mu.Lock()
			if err != nil && fatal == nil {
				fatal = err
			}
			res.Extracted += n
			res.Superseded += len(batch) - n
			mu.Unlock()
			if err == nil && x.Crash != nil {
				for range n {
					x.Crash("graph.chunk_extracted")
				}
			}
		}
	}()
	for _, c := range todo {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(c ChunkText) {
			defer func() { <-sem; wg.Done() }()
			g, err := x.tryChunk(ctx, fileID, c, schema, model, modelID)
			if err == nil {
				select {
				case found <- g:
				case <-ctx.Done():
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			res.Failed++
			if _, rerr := x.pool.Exec(ctx, `INSERT INTO graph_chunk_extractions (kb_id, chunk_id, file_id, status, error)
				VALUES ($1, $2, $3, 'failed', $4)
				ON CONFLICT (kb_id, chunk_id) DO UPDATE SET status = 'failed', attempts = graph_chunk_extractions.attempts + 1,
				error = EXCLUDED.error, updated_at = now()`, kbID, c.ID, fileID, clip(err.Error())); rerr != nil && fatal == nil {
				fatal = rerr
			}
		}(c)
	}
	wg.Wait()
	close(found)
	<-wdone
	if fatal != nil {
		return res, fatal
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.Failed > 0 {
		return res, fmt.Errorf("graph extraction of file %s: %d of %d chunks failed", fileID, res.Failed, len(todo))
	}
	return res, nil
}

// maxWriteBatch bounds the chunks one commit writes (and the extractions
// waiting for the writer). A commit costs a few round trips whatever its
// size, so fast extraction needs large batches to approach a bulk COPY.
const maxWriteBatch = 1024

// commit writes a batch of chunk graphs and marks the chunks done, and
// returns how many it marked. The mark is made under the knowledge base's
// graph lock and only while the extractor configuration still has version
// (0: not checked): a reset or a change of rules since the extraction
// started (which bumps the version under the same lock, see Builder.reset)
// makes the batch stale, and its graph is not kept (the embedded engine does
// not write it; another engine's write is removed again) — without this, an
// extraction racing a reset would leave the old rules' graph behind, marked
// done, and it would never be extracted again. With the embedded engine the
// graph and the marks commit together, so a crash never leaves a chunk's
// graph without its mark or the reverse.
func (x *Extractor) commit(ctx context.Context, kbID, fileID string, batch []ChunkGraph, version int64) (int, error) {
	ids := make([]string, len(batch))
	for i, g := range batch {
		ids[i] = g.ChunkID
	}
	mark := func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `INSERT INTO graph_chunk_extractions (kb_id, chunk_id, file_id, status)
			SELECT $1, id, $3, 'done' FROM unnest($2::text[]) AS id
			WHERE $4 = 0 OR EXISTS (SELECT 1 FROM graph_extractor_configs WHERE kb_id = $1 AND version = $4)
			ON CONFLICT (kb_id, chunk_id) DO UPDATE SET status = 'done', error = '', updated_at = now()`, kbID, ids, fileID, version)
		return tag.RowsAffected(), err
	}
	// The embedded engine writes the graph and the marks in one transaction
	// (one commit per batch, and a stale batch is never written).
	if w, ok := x.engine.(txWriter); ok {
		var marked int64
		err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
			if err := lockKB(ctx, tx, kbID); err != nil {
				return err
			}
			var err error
			if marked, err = mark(tx); err != nil || marked == 0 {
				return err
			}
			return w.WriteChunksTx(ctx, tx, kbID, batch)
		})
		return int(marked), err
	}
	if err := x.engine.WriteChunks(ctx, kbID, batch); err != nil {
		return 0, err
	}
	var marked int64
	err := pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		var err error
		marked, err = mark(tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	if marked == 0 {
		return 0, x.engine.RemoveChunks(ctx, kbID, ids)
	}
	return int(marked), nil
}

// txWriter is an engine that writes in the extractor's own database
// transaction (the embedded engine, Postgres).
type txWriter interface {
	WriteChunksTx(ctx context.Context, tx pgx.Tx, kbID string, chunks []ChunkGraph) error
}

// tryChunk extracts one chunk, trying again after a failure (a model
// error, an unreadable reply) up to x.Tries times.
func (x *Extractor) tryChunk(ctx context.Context, fileID string, c ChunkText, schema Schema, model Model, modelID string) (ChunkGraph, error) {
	tries := max(x.Tries, 1)
	var err error
	var g ChunkGraph
	for n := 1; n <= tries; n++ {
		if g, err = x.extractChunk(ctx, fileID, c, schema, model, modelID); err == nil {
			return g, nil
		}
		if n == tries || ctx.Err() != nil {
			break
		}
		wait := time.Duration(0)
		if x.Backoff != nil {
			wait = x.Backoff(n)
		}
		select {
		case <-ctx.Done():
			return g, ctx.Err()
		case <-time.After(wait):
		}
	}
	return g, err
}

// extractChunk asks the model for one chunk's graph (written by commit).
func (x *Extractor) extractChunk(ctx context.Context, fileID string, c ChunkText, schema Schema, model Model, modelID string) (ChunkGraph, error) {
	var user strings.Builder
	if len(schema.EntityTypes) > 0 {
		fmt.Fprintf(&user, "Entity types: %s\n", strings.Join(schema.EntityTypes, ", "))
	}
	if len(schema.RelationTypes) > 0 {
		fmt.Fprintf(&user, "Relation types: %s\n", strings.Join(schema.RelationTypes, ", "))
	}
	fmt.Fprintf(&user, "Text:\n%s", c.Content)
	resp, err := model.Stream(ctx, llm.Request{Model: modelID, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: Prompt},
		{Role: llm.RoleUser, Content: user.String()},
	}}, func(llm.Delta) error { return nil })
	if err != nil {
		return ChunkGraph{}, fmt.Errorf("extract chunk %s: %w", c.ID, err)
	}
	ex, err := ParseExtraction(resp.Content)
	if err != nil {
		return ChunkGraph{}, fmt.Errorf("extract chunk %s: %w", c.ID, err)
	}
	return Build(c.ID, fileID, ex), nil
}

// ErrBadExtraction: the model's reply is not the JSON object asked for.
var ErrBadExtraction = errors.New("the model did not return an extraction object")

// ParseExtraction reads a model reply: a JSON object, possibly inside a
// Markdown code fence or surrounded by prose.
func ParseExtraction(reply string) (Extracted, error) {
	var x Extracted
	s := strings.TrimSpace(reply)
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 && j > i {
		s = s[i : j+1]
	} else {
		return x, ErrBadExtraction
	}
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		return x, fmt.Errorf("%w: %v", ErrBadExtraction, err)
	}
	return x, nil
}

func clip(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}
