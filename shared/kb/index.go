package kb

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// KeywordWriter applies chunk changes to the keyword index inside a transaction.
type KeywordWriter interface {
	Apply(ctx context.Context, tx pgx.Tx, indexID string, remove []string, add []keyword.Doc) error
}

// KeywordPreparer is a KeywordWriter that can analyse documents ahead of the
// transaction that adds them (keyword.Index): the *keyword.Prepared it
// returns is a KeywordWriter that commits them without analysing them again.
type KeywordPreparer interface {
	KeywordWriter
	Prepare(docs []keyword.Doc) *keyword.Prepared
}

// PrepareKeyword returns a KeywordWriter for committing chunks: when kw is a
// KeywordPreparer, the chunks not in existing (those CommitIndexTx will add
// unless the file's chunks change meanwhile) analysed ahead, outside any
// transaction; otherwise kw itself. kb-index calls it while the chunks are
// embedded, so that the commit only copies rows in.
func PrepareKeyword(kw KeywordWriter, chunks []IndexedChunk, existing map[string]bool) KeywordWriter {
	p, ok := kw.(KeywordPreparer)
	if !ok {
		return kw
	}
	docs := make([]keyword.Doc, 0, len(chunks))
	for _, c := range chunks {
		if !existing[c.ID] {
			docs = append(docs, keyword.Doc{ID: c.ID, Text: c.Chunk.Content})
		}
	}
	return p.Prepare(docs)
}

// IndexedChunk is a chunk with its stable id.
type IndexedChunk struct {
	ID    string
	Chunk chunk.Chunk
}

// ExistingChunks returns the chunk ids a file has now.
func (s *Store) ExistingChunks(ctx context.Context, fileID string) (map[string]bool, error) {
	return existingChunks(ctx, s.pool, fileID)
}

func existingChunks(ctx context.Context, db postgres.DB, fileID string) (map[string]bool, error) {
	rows, err := db.Query(ctx, `SELECT chunk_id FROM knowledge_chunks WHERE file_id = $1`, fileID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// CommitIndex is CommitIndexTx in its own transaction, through ob, with the
// io.yuxi.document.indexed.v1 event of the file in the same transaction
// (kb-graph extracts the graph of the committed chunks).
func (s *Store) CommitIndex(ctx context.Context, ob Outbox, kw KeywordWriter, f File, chunks []IndexedChunk) ([]string, error) {
	var removed []string
	err := ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		var err error
		if removed, err = s.CommitIndexTx(ctx, tx, kw, f, chunks); err != nil {
			return err
		}
		return emit(outbox.Pending{Payload: events.DocumentIndexed{KBID: f.KBID, FileID: f.FileID},
			DedupeKey: fmt.Sprintf("indexed:%s:%d", f.FileID, stageStamp(f))})
	})
	return removed, err
}

// CommitIndexTx replaces a file's chunks with chunks in tx, as the claimed
// indexing attempt f: removed chunks are deleted (their vectors owed to the
// vector store through knowledge_vector_deletes), new chunks inserted,
// unchanged ones (same content, same id) re-positioned; the keyword index
// follows in the same transaction; the file becomes indexed and the KB's
// index version moves. The new chunks' vectors must already be in the vector
// store, recorded by RecordVectorWrites; recorded vectors the commit does not
// keep are owed deletions too. It returns the ids whose vectors are to be
// deleted (FlushVectorDeletes). ErrStageLost: the stage is no longer f's.
func (s *Store) CommitIndexTx(ctx context.Context, tx pgx.Tx, kw KeywordWriter, f File, chunks []IndexedChunk) ([]string, error) {
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT true FROM knowledge_files WHERE file_id = $1 AND status = 'indexing' AND stage_attempts = $2
		AND stage_started_at = $3 FOR UPDATE`, f.FileID, f.StageAttempts, f.StageStartedAt).Scan(&ok); err != nil {
		if err == pgx.ErrNoRows {
			return nil, ErrStageLost
		}
		return nil, err
	}
	existing, err := existingChunks(ctx, tx, f.FileID)
	if err != nil {
		return nil, err
	}
	keep := make(map[string]bool, len(chunks))
	var added [][]any
	var addDocs []keyword.Doc
	tokens := 0
	for _, c := range chunks {
		keep[c.ID] = true
		tokens += c.Chunk.TokenCount
		if existing[c.ID] {
			if _, err := tx.Exec(ctx, `UPDATE knowledge_chunks SET chunk_index = $2, start_char_pos = $3, end_char_pos = $4 WHERE chunk_id = $1`,
				c.ID, c.Chunk.Index, c.Chunk.StartChar, c.Chunk.EndChar); err != nil {
				return nil, err
			}
			continue
		}
		meta := fmt.Sprintf(`{"headings":%s}`, jsonStrings(c.Chunk.Headings))
		added = append(added, []any{c.ID, f.KBID, f.FileID, c.Chunk.Index, c.Chunk.Content, c.Chunk.ContentHash,
			c.Chunk.TokenCount, c.Chunk.StartChar, c.Chunk.EndChar, []byte(meta)})
		addDocs = append(addDocs, keyword.Doc{ID: c.ID, Text: c.Chunk.Content})
	}
	var removed []string
	for id := range existing {
		if !keep[id] {
			removed = append(removed, id)
		}
	}
	// Vectors written for this file but not kept (a crashed attempt's other
	// chunking) are owed deletions too; the kept ones are now tracked by their chunks.
	orphanRows, err := tx.Query(ctx, `DELETE FROM knowledge_vector_writes WHERE file_id = $1 RETURNING chunk_id`, f.FileID)
	if err != nil {
		return nil, err
	}
	orphans, err := pgx.CollectRows(orphanRows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	orphans = slices.DeleteFunc(orphans, func(id string) bool { return keep[id] })
	if len(orphans) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id) SELECT $1, unnest($2::text[])
			ON CONFLICT DO NOTHING`, f.KBID, orphans); err != nil {
			return nil, err
		}
	}
	if len(removed) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM knowledge_chunks WHERE chunk_id = ANY($1)`, removed); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id) SELECT $1, unnest($2::text[])
			ON CONFLICT DO NOTHING`, f.KBID, removed); err != nil {
			return nil, err
		}
	}
	if len(added) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge_chunks"},
			[]string{"chunk_id", "kb_id", "file_id", "chunk_index", "content", "content_hash", "token_count", "start_char_pos", "end_char_pos", "metadata"},
			pgx.CopyFromRows(added)); err != nil {
			return nil, fmt.Errorf("write chunks: %w", err)
		}
	}
	if err := kw.Apply(ctx, tx, f.KBID, removed, addDocs); err != nil {
		return nil, fmt.Errorf("update keyword index: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET status = 'indexed', chunk_count = $2, token_count = $3, error_message = NULL,
		stage_started_at = NULL, stage_attempts = 0, updated_at = clock_timestamp() WHERE file_id = $1`, f.FileID, len(chunks), tokens); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE knowledge_bases SET index_version = index_version + 1, updated_at = now() WHERE kb_id = $1`, f.KBID); err != nil {
		return nil, err
	}
	removed = append(removed, orphans...)
	return removed, nil
}

// RecordVectorWrites notes, before the vectors of a file's uncommitted chunks
// are written, that they will exist (see knowledge_vector_writes), and
// cancels deletions still owed for the same ids — a chunk removed earlier and
// now back — so that a flush cannot remove the vector about to be written.
// It fails with ErrStageLost when the file is gone. It runs in its own
// transaction, committed before the vectors are written.
func (s *Store) RecordVectorWrites(ctx context.Context, f File, ids []string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO knowledge_vector_writes (file_id, chunk_id, kb_id)
			SELECT $1, unnest($2::text[]), $3 WHERE EXISTS (SELECT 1 FROM knowledge_files WHERE file_id = $1)
			ON CONFLICT DO NOTHING`, f.FileID, ids, f.KBID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_files WHERE file_id = $1)`, f.FileID).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return ErrStageLost
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM knowledge_vector_deletes WHERE kb_id = $1 AND chunk_id = ANY($2)`, f.KBID, ids)
		return err
	})
}

func jsonStrings(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	out := "["
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf("%q", v)
	}
	return out + "]"
}

// CachedEmbeddings returns cached vectors of model for content hashes.
func (s *Store) CachedEmbeddings(ctx context.Context, model string, hashes []string) (map[string][]float32, error) {
	rows, err := s.pool.Query(ctx, `SELECT content_hash, vec FROM embedding_cache WHERE model = $1 AND content_hash = ANY($2)`, model, hashes)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]float32{}
	for rows.Next() {
		var h string
		var b []byte
		if err := rows.Scan(&h, &b); err != nil {
			return nil, err
		}
		out[h] = decodeVec(b)
	}
	return out, rows.Err()
}

// CacheEmbeddings stores vectors of model by content hash (idempotent).
func (s *Store) CacheEmbeddings(ctx context.Context, model string, vecs map[string][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	hashes := make([]string, 0, len(vecs))
	blobs := make([][]byte, 0, len(vecs))
	dims := make([]int32, 0, len(vecs))
	for h, v := range vecs {
		hashes = append(hashes, h)
		blobs = append(blobs, encodeVec(v))
		dims = append(dims, int32(len(v)))
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO embedding_cache (model, content_hash, dim, vec)
		SELECT $1, h, d, v FROM unnest($2::text[], $3::int[], $4::bytea[]) AS t(h, d, v)
		ON CONFLICT DO NOTHING`, model, hashes, dims, blobs)
	return err
}

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
