package graph

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ExternalCleaner is kb.GraphCleaner for an engine outside PostgreSQL
// (Neo4j): it removes the files' graph through the engine, then, in the
// deleting transaction, their extraction progress (or the knowledge base's
// progress and extractor configuration) under the graph lock — the engine
// first, as its own writes take that lock's place there.
// An engine failure fails the deletion (the caller retries); a commit that
// fails after the engine's removal leaves the files without their graph
// until the graph is reset and rebuilt (graph-build reset) — the engine has
// no transaction to share with PostgreSQL.
type ExternalCleaner struct {
	Engine Engine
}

// RemoveFilesTx implements kb.GraphCleaner. It reports no vector ids: the
// engine's DeleteFile does not say which entities it removed, so their
// vectors stay until reconcile's all_vectors (recall ignores ids no longer
// in the graph).
func (c ExternalCleaner) RemoveFilesTx(ctx context.Context, tx pgx.Tx, kbID string, fileIDs []string) ([]string, error) {
	if len(fileIDs) == 0 {
		return nil, nil
	}
	for _, f := range uniq(fileIDs) {
		if err := c.Engine.DeleteFile(ctx, kbID, f); err != nil {
			return nil, err
		}
	}
	if err := lockKB(ctx, tx, kbID); err != nil {
		return nil, err
	}
	_, err := tx.Exec(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1 AND file_id = ANY($2)`, kbID, fileIDs)
	return nil, err
}

// RemoveKBTx implements kb.GraphCleaner.
func (c ExternalCleaner) RemoveKBTx(ctx context.Context, tx pgx.Tx, kbID string) error {
	if err := c.Engine.DeleteKB(ctx, kbID); err != nil {
		return err
	}
	if err := lockKB(ctx, tx, kbID); err != nil {
		return err
	}
	for _, t := range []string{"graph_chunk_extractions", "graph_extractor_configs"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+t+` WHERE kb_id = $1`, kbID); err != nil {
			return err
		}
	}
	return nil
}
