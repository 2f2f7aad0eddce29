package kb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
)

// Statistics is GET /api/knowledge/stats: how many knowledge bases the
// caller reads, by type, and how many files (not folders) they hold. The
// original counts every knowledge base of the instance; here an admin of one
// department does not learn how many another department has.
type Statistics struct {
	TotalDatabases int            `json:"total_databases"`
	KBTypes        map[string]int `json:"kb_types"`
	TotalFiles     int64          `json:"total_files"`
}

// Statistics counts the knowledge bases sub reads and their files.
func (s *Store) Statistics(ctx context.Context, sub access.Subject) (Statistics, error) {
	list, err := s.List(ctx, sub)
	if err != nil {
		return Statistics{}, err
	}
	st := Statistics{TotalDatabases: len(list), KBTypes: map[string]int{}}
	ids := make([]string, len(list))
	for i, k := range list {
		st.KBTypes[k.KBType]++
		ids[i] = k.KBID
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_files WHERE kb_id = ANY($1) AND NOT is_folder`, ids).
		Scan(&st.TotalFiles); err != nil {
		return Statistics{}, fmt.Errorf("count files: %w", err)
	}
	return st, nil
}

// RepairResult answers POST …/stats/repair (the original's fields).
type RepairResult struct {
	Status              string         `json:"status"`
	Stats               map[string]any `json:"stats"`
	ScannedFiles        int            `json:"scanned_files"`
	ScannedIndexedFiles int            `json:"scanned_indexed_files"`
	SkippedUnindexed    int            `json:"skipped_unindexed_files"`
	UpdatedFiles        int            `json:"updated_files"`
	UpdatedChunkFiles   int            `json:"updated_chunk_files"`
	UpdatedTokenFiles   int            `json:"updated_token_files"`
}

// RepairStats recomputes the chunk and token counts of every file of a
// knowledge base sub manages from its committed chunks (an indexed file: the
// count and token sum of its chunks; any other file: zero), in one
// transaction under the files' row locks, so that a concurrent index commit
// is either before (and counted) or after (and writes its own counts).
func (l *Library) RepairStats(ctx context.Context, sub access.Subject, kbID string) (RepairResult, error) {
	res := RepairResult{Status: "success"}
	err := pgx.BeginFunc(ctx, l.store.pool, func(tx pgx.Tx) error {
		if _, err := l.store.GetManagedTx(ctx, tx, sub, kbID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT f.file_id, f.status = 'indexed', f.chunk_count, f.token_count,
				coalesce(c.n, 0), coalesce(c.tokens, 0)
			FROM knowledge_files f
			LEFT JOIN (SELECT file_id, count(*) AS n, sum(token_count) AS tokens FROM knowledge_chunks
				WHERE kb_id = $1 GROUP BY file_id) c ON c.file_id = f.file_id
			WHERE f.kb_id = $1 AND NOT f.is_folder ORDER BY f.file_id FOR UPDATE OF f`, kbID)
		if err != nil {
			return err
		}
		type fix struct {
			id             string
			chunks, tokens int64
		}
		var fixes []fix
		for rows.Next() {
			var id string
			var indexed bool
			var chunks, tokens, n, sum int64
			if err := rows.Scan(&id, &indexed, &chunks, &tokens, &n, &sum); err != nil {
				rows.Close()
				return err
			}
			res.ScannedFiles++
			if indexed {
				res.ScannedIndexedFiles++
			} else {
				res.SkippedUnindexed++
				n, sum = 0, 0
			}
			if chunks != n {
				res.UpdatedChunkFiles++
			}
			if tokens != sum {
				res.UpdatedTokenFiles++
			}
			if chunks != n || tokens != sum {
				fixes = append(fixes, fix{id, n, sum})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, f := range fixes {
			if _, err := tx.Exec(ctx, `UPDATE knowledge_files SET chunk_count = $2, token_count = $3 WHERE file_id = $1`,
				f.id, f.chunks, f.tokens); err != nil {
				return err
			}
		}
		res.UpdatedFiles = len(fixes)
		var files, chunks, tokens int64
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(chunk_count), 0), coalesce(sum(token_count), 0)
			FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder`, kbID).Scan(&files, &chunks, &tokens); err != nil {
			return err
		}
		res.Stats = map[string]any{"file_count": files, "chunk_count": chunks, "token_count": tokens}
		return nil
	})
	if err != nil {
		return RepairResult{}, err
	}
	return res, nil
}

// Excerpts returns the start of the first chunk of each of fileIDs (of
// kbID) that has chunks, at most maxChars characters each, by file id.
func (s *Store) Excerpts(ctx context.Context, kbID string, fileIDs []string, maxChars int) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (file_id) file_id, left(content, $3) FROM knowledge_chunks
		WHERE kb_id = $1 AND file_id = ANY($2) ORDER BY file_id, chunk_index`, kbID, fileIDs, maxChars)
	if err != nil {
		return nil, fmt.Errorf("chunk excerpts: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, err
		}
		out[id] = text
	}
	return out, rows.Err()
}
