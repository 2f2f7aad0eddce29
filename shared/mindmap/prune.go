package mindmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// FilesDeletedTx cuts deleted files from the knowledge base's stored mind
// map in the deleting transaction (kb.FileDeletionHook; the original also
// removes the leaves when files are deleted): their ids leave file_ids, and
// their leaves — by the names the map recorded, unless a file still covered
// has the same name — leave the tree, with categories left empty. The
// metadata says how many files deletions removed (pruned_files) and when.
func (s *Service) FilesDeletedTx(ctx context.Context, tx pgx.Tx, kbID string, fileIDs []string) error {
	var tree, meta []byte
	var ids []string
	err := tx.QueryRow(ctx, `SELECT mindmap, file_ids, metadata FROM kb_mindmaps WHERE kb_id = $1 AND file_ids && $2 FOR UPDATE`,
		kbID, fileIDs).Scan(&tree, &ids, &meta)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // no map, or none of the files is in it
	}
	if err != nil {
		return fmt.Errorf("load mind map: %w", err)
	}
	var root Node
	if err := json.Unmarshal(tree, &root); err != nil {
		return fmt.Errorf("stored mind map: %w", err)
	}
	md := map[string]any{}
	_ = json.Unmarshal(meta, &md)
	names, _ := md["file_names"].(map[string]any)
	keep := ids[:0:0]
	removed := 0
	gone := map[string]bool{}
	for _, id := range ids {
		if slices.Contains(fileIDs, id) {
			removed++
			if n, ok := names[id].(string); ok {
				gone[n] = true
			}
			delete(names, id)
			continue
		}
		keep = append(keep, id)
	}
	for _, n := range names { // a kept file of the same name keeps its leaf
		if n, ok := n.(string); ok {
			delete(gone, n)
		}
	}
	prev, _ := md["pruned_files"].(float64)
	md["pruned_files"] = int(prev) + removed
	md["pruned_at"] = time.Now().UTC().Format(time.RFC3339)
	if names != nil {
		md["file_names"] = names
	}
	tb, _ := json.Marshal(cut(root, gone))
	mb, _ := json.Marshal(md)
	if _, err := tx.Exec(ctx, `UPDATE kb_mindmaps SET mindmap = $2, file_ids = $3, metadata = $4, updated_at = now() WHERE kb_id = $1`,
		kbID, tb, keep, mb); err != nil {
		return fmt.Errorf("prune mind map: %w", err)
	}
	return nil
}
