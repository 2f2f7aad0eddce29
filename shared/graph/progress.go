package graph

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// BuildProgress is one knowledge base's graph build as the task centre
// (shared/task) shows it: a read of what this package records, never a
// second writer. Status is BuildStatus.Status's (empty | building | done |
// partial) for a knowledge base with an extractor configured.
type BuildProgress struct {
	KBID         string
	Status       string
	TotalChunks  int64
	DoneChunks   int64
	FailedChunks int64
	Version      int64     // the extractor configuration's version (a reset moves it)
	ConfiguredAt time.Time // the extractor configuration's last change
	UpdatedAt    time.Time // the latest extraction, or ConfiguredAt
}

// Progress reports the graph builds of the knowledge bases in kbIDs that
// have an extractor configured. The caller has checked access to them.
// A build cannot be stopped: kb-graph extracts every queued file (Reset
// removes the graph and its progress instead).
func (b *Builder) Progress(ctx context.Context, kbIDs []string) ([]BuildProgress, error) {
	if len(kbIDs) == 0 {
		return nil, nil
	}
	rows, err := b.Pool.Query(ctx, `SELECT c.kb_id, c.version, c.updated_at,
		count(e.chunk_id) FILTER (WHERE e.status = 'done'), count(e.chunk_id) FILTER (WHERE e.status = 'failed'),
		greatest(c.updated_at, max(e.updated_at))
		FROM graph_extractor_configs c LEFT JOIN graph_chunk_extractions e ON e.kb_id = c.kb_id
		WHERE c.kb_id = ANY($1) GROUP BY c.kb_id, c.version, c.updated_at`, kbIDs)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BuildProgress, error) {
		var p BuildProgress
		err := r.Scan(&p.KBID, &p.Version, &p.ConfiguredAt, &p.DoneChunks, &p.FailedChunks, &p.UpdatedAt)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		p := &out[i]
		if p.TotalChunks, err = b.Files.ChunkCount(ctx, p.KBID); err != nil {
			return nil, err
		}
		p.Status = buildState(true, p.TotalChunks, p.DoneChunks, p.FailedChunks)
	}
	return out, nil
}

// buildState is a build's status from its counts.
func buildState(configured bool, total, done, failed int64) string {
	switch {
	case !configured:
		return "not_configured"
	case total == 0:
		return "empty"
	case done >= total:
		return "done"
	case failed > 0 && done+failed >= total:
		return "partial"
	default:
		return "building"
	}
}
