package graph

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ReconcileResult answers POST …/graph-build/reconcile.
type ReconcileResult struct {
	Mode          string `json:"mode"`
	Status        string `json:"status"` // queued | nothing_to_do
	RetriedChunks int    `json:"retried_chunks"`
	QueuedFiles   int    `json:"queued_files"`
	// ReindexedEntities: all_vectors embedded this many entities again.
	ReindexedEntities int `json:"reindexed_entities"`
}

// Reconcile (POST …/graph-build/reconcile, manage access) repairs a
// knowledge base's graph build. Mode "failed" (the default) forgets the
// failed extractions, given-up ones included (their attempt counts start
// again), and queues the files that had them, so kb-graph extracts exactly
// those chunks again. Mode "all_vectors" also drops the knowledge base's
// graph vectors and embeds every entity and triple again, before answering
// (the original's re-embedding); without a vector index it is refused (422).
func (b *Builder) Reconcile(ctx context.Context, sub access.Subject, kbID, mode string) (ReconcileResult, error) {
	if mode == "" {
		mode = "failed"
	}
	if mode != "failed" && mode != "all_vectors" {
		return ReconcileResult{}, failure.Unprocessable("invalid_mode", "mode must be failed or all_vectors")
	}
	if err := b.manageable(ctx, sub, kbID); err != nil {
		return ReconcileResult{}, err
	}
	if mode == "all_vectors" && b.Vectors == nil {
		return ReconcileResult{}, failure.Unprocessable("graph_vectors_unsupported", "graph vectors are not configured (recall is by entity name)")
	}
	if _, ok, err := b.Config(ctx, kbID); err != nil {
		return ReconcileResult{}, err
	} else if !ok {
		return ReconcileResult{}, failure.Conflict("graph_not_configured", "configure the graph extractor first (POST …/graph-build/config)")
	}
	res := ReconcileResult{Mode: mode, Status: "nothing_to_do"}
	if mode == "all_vectors" {
		n, err := b.reindexVectors(ctx, kbID)
		if err != nil {
			return res, err
		}
		res.ReindexedEntities, res.Status = n, "reindexed"
	}
	var files []string
	// Under the graph lock an extraction's commit takes, so a commit in
	// flight either lands before (and its failures are forgotten here) or
	// after (and its outcome stands).
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		if err := lockKB(ctx, tx, kbID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1 AND status = 'failed' RETURNING file_id`, kbID)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		res.RetriedChunks = len(got)
		slices.Sort(got)
		files = slices.Compact(got)
		return nil
	})
	if err != nil || len(files) == 0 {
		return res, err
	}
	indexed, err := b.Files.IndexedFileIDs(ctx, kbID)
	if err != nil {
		return res, err
	}
	files = slices.DeleteFunc(files, func(id string) bool { return !slices.Contains(indexed, id) })
	if len(files) == 0 {
		return res, nil
	}
	if res.QueuedFiles, err = b.queueFiles(ctx, kbID, files); err != nil {
		return res, err
	}
	res.Status = "queued"
	return res, nil
}
