package kb

import (
	"context"
	"strings"
)

// BatchPrefix starts every ingestion batch id. A batch is the files one
// POST …/documents registered (or one restage sent back): its id is the
// task id GET /api/tasks/{task_id} answers for (shared/task reads the
// batch from knowledge_files; this package is the only writer).
const BatchPrefix = "ingest_"

// NewBatchID returns a fresh ingestion batch id.
func NewBatchID() string { return newID(BatchPrefix) }

// IsBatchID reports whether id names an ingestion batch.
func IsBatchID(id string) bool {
	return strings.HasPrefix(id, BatchPrefix) && len(id) > len(BatchPrefix)
}

// CancelBatch stops batch of kbID: its files that have not started their
// next stage (uploaded, waiting for a parse; parsed, waiting for indexing)
// start none — they stay in that status, to be sent again with
// documents/parse or …/index (which starts a new batch) —, and a stage
// already running finishes. It returns how many files were stopped; 0 when
// nothing was left to stop (the batch is finished or already cancelled).
// The caller checks that the subject may manage kbID.
func (s *Store) CancelBatch(ctx context.Context, kbID, batch string) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE knowledge_files SET ingest_cancelled_at = clock_timestamp(), updated_at = clock_timestamp()
		WHERE kb_id = $1 AND ingest_batch = $2 AND NOT is_folder AND ingest_cancelled_at IS NULL
		  AND (status = 'uploaded' OR (status = 'parsed' AND coalesce(processing_params->>'auto_index', 'true') = 'true')
		       OR status IN ('parsing', 'indexing'))`, kbID, batch)
	if err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}
