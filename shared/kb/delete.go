package kb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Removed lists what a deletion left for the object and vector stores.
type Removed struct {
	Files      []File
	ChunkIDs   []string
	ObjectKeys []string // originals, Markdown and images to delete from the object store
	// GraphVectorIDs are the vectors, in GraphCollection, of the graph
	// entities and triples the deletion orphaned (GraphCleaner).
	GraphVectorIDs []string
}

// DeleteFilesTx deletes files (and, recursively, folders) of kbID in tx: their
// chunks leave the keyword index in the same transaction and their vectors are
// owed to the vector store (knowledge_vector_deletes). The caller deletes the
// returned objects and vectors (and the orphaned graph vectors) after commit (Library.RemoveFiles is the use
// case in its own transaction).
func (s *Store) DeleteFilesTx(ctx context.Context, tx pgx.Tx, kw KeywordWriter, kbID string, fileIDs []string) (Removed, error) {
	var out Removed
	if len(fileIDs) == 0 {
		return out, nil
	}
	files, err := queryFiles(ctx, tx, `WITH RECURSIVE tree AS (
			SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND file_id = ANY($2)
			UNION SELECT f.file_id FROM knowledge_files f JOIN tree t ON f.parent_id = t.file_id WHERE f.kb_id = $1)
		SELECT `+fileCols+` FROM knowledge_files WHERE file_id IN (SELECT file_id FROM tree) FOR UPDATE`, kbID, fileIDs)
	if err != nil {
		return out, err
	}
	found := map[string]bool{}
	ids := make([]string, 0, len(files))
	for _, f := range files {
		found[f.FileID] = true
		ids = append(ids, f.FileID)
		if f.ObjectKey != nil && f.Source == "upload" {
			out.ObjectKeys = append(out.ObjectKeys, *f.ObjectKey)
		}
		if f.MarkdownKey != nil {
			out.ObjectKeys = append(out.ObjectKeys, *f.MarkdownKey)
		}
	}
	for _, id := range fileIDs {
		if !found[id] {
			return out, failure.NotFound("file_not_found", "file %s not found in this knowledge base", id)
		}
	}
	rows, err := tx.Query(ctx, `SELECT chunk_id FROM knowledge_chunks WHERE file_id = ANY($1)`, ids)
	if err != nil {
		return out, err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return out, err
		}
		out.ChunkIDs = append(out.ChunkIDs, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	imgs, err := tx.Query(ctx, `SELECT object_key FROM knowledge_images WHERE file_id = ANY($1)`, ids)
	if err != nil {
		return out, err
	}
	for imgs.Next() {
		var k string
		if err := imgs.Scan(&k); err != nil {
			imgs.Close()
			return out, err
		}
		out.ObjectKeys = append(out.ObjectKeys, k)
	}
	imgs.Close()
	if len(out.ChunkIDs) > 0 {
		if err := kw.Apply(ctx, tx, kbID, out.ChunkIDs, nil); err != nil {
			return out, fmt.Errorf("update keyword index: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`,
			kbID, out.ChunkIDs); err != nil {
			return out, err
		}
	}
	// Vectors written for chunks never committed (an indexing attempt in
	// flight or crashed) go with the file.
	if _, err := tx.Exec(ctx, `INSERT INTO knowledge_vector_deletes (kb_id, chunk_id)
		SELECT $1, chunk_id FROM knowledge_vector_writes WHERE file_id = ANY($2) ON CONFLICT DO NOTHING`, kbID, ids); err != nil {
		return out, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM knowledge_files WHERE file_id = ANY($1)`, ids); err != nil {
		return out, err
	}
	if s.graph != nil {
		gv, err := s.graph.RemoveFilesTx(ctx, tx, kbID, ids)
		if err != nil {
			return out, fmt.Errorf("remove the files' graph: %w", err)
		}
		out.GraphVectorIDs = gv
	}
	for _, h := range s.onDelete {
		if err := h.FilesDeletedTx(ctx, tx, kbID, ids); err != nil {
			return out, err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE knowledge_bases SET index_version = index_version + 1, updated_at = now() WHERE kb_id = $1`, kbID); err != nil {
		return out, err
	}
	out.Files = files
	return out, nil
}

// VectorDeleter deletes vectors by id.
type VectorDeleter interface {
	Delete(ctx context.Context, collection string, ids []string) error
}

// FlushVectorDeletes applies the vector deletions owed for kbID ("" for
// every KB) — after the transactions that recorded them committed — and
// forgets them. The rows stay locked while their vectors are deleted, so
// that RecordVectorWrites, cancelling the deletion of an id about to be
// written again, waits for it rather than losing the new vector. Safe to run
// concurrently and repeatedly; the sweep runs it for deletions a crash left
// behind. Each batch is its own transaction.
func (s *Store) FlushVectorDeletes(ctx context.Context, vs VectorDeleter, kbID string) (int, error) {
	n := 0
	for {
		done, err := s.flushVectorBatch(ctx, vs, kbID)
		n += done
		if err != nil || done < flushBatch {
			return n, err
		}
	}
}

const flushBatch = 5000

func (s *Store) flushVectorBatch(ctx context.Context, vs VectorDeleter, kbID string) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT d.kb_id, d.chunk_id, EXISTS (SELECT 1 FROM knowledge_bases b WHERE b.kb_id = d.kb_id)
			FROM knowledge_vector_deletes d WHERE $1 = '' OR d.kb_id = $1 LIMIT $2 FOR UPDATE OF d SKIP LOCKED`, kbID, flushBatch)
		if err != nil {
			return err
		}
		byKB := map[string][]string{}
		live := map[string]bool{}
		for rows.Next() {
			var k, c string
			var exists bool
			if err := rows.Scan(&k, &c, &exists); err != nil {
				rows.Close()
				return err
			}
			byKB[k] = append(byKB[k], c)
			live[k] = exists
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for k, ids := range byKB {
			if live[k] {
				if err := vs.Delete(ctx, k, ids); err != nil {
					return fmt.Errorf("delete %d vectors of %s: %w", len(ids), k, err)
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM knowledge_vector_deletes WHERE kb_id = $1 AND chunk_id = ANY($2)`, k, ids); err != nil {
				return err
			}
			n += len(ids)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
