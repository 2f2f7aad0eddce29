package evaluation

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Cancelling (the task centre's POST /api/tasks/{id}/cancel asks here; the
// caller's rights are checked there). A cancel only records the request:
// the batch in flight finishes and commits its results, and the run or
// generation then stops at that batch boundary with status cancelled
// instead of emitting its next batch. A run whose last batch is in flight
// completes (its work is all done). The commit reads the request under the
// row lock its own UPDATE takes, so a cancel is either seen by that commit
// or by the next batch's delivery, which stops without doing any work.

// CancelRun asks RAG evaluation run runID to stop. It reports false when
// the run is not running or a cancel was already asked.
func (s *Service) CancelRun(ctx context.Context, runID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE evaluation_runs SET cancel_requested_at = now()
		WHERE run_id = $1 AND status = 'running' AND cancel_requested_at IS NULL`, runID)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// stopRunIfCancelled ends a run whose cancel was asked before batch batch
// started (the previous commit had not seen it).
func (s *Service) stopRunIfCancelled(ctx context.Context, runID string, batch int) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE evaluation_runs SET status = 'cancelled', completed_at = now()
		WHERE run_id = $1 AND status = 'running' AND next_batch = $2 AND cancel_requested_at IS NOT NULL`, runID, batch)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

func cancelRunTx(ctx context.Context, tx pgx.Tx, runID string) error {
	_, err := tx.Exec(ctx, `UPDATE evaluation_runs SET status = 'cancelled', completed_at = now() WHERE run_id = $1`, runID)
	return err
}

// CancelGeneration asks the dataset generation with task id taskID (its
// build_metadata.task_id) to stop. It reports false when that generation is
// not pending or running, or a cancel was already asked. A cancelled
// generation keeps the items it made and can be resumed.
func (s *Service) CancelGeneration(ctx context.Context, taskID string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE evaluation_datasets SET build_metadata = build_metadata || '{"cancel_requested": true}', updated_at = now()
		WHERE build_metadata->>'task_id' = $1 AND build_metadata->>'source' = 'generated'
		  AND build_metadata->>'status' IN ('pending', 'running')
		  AND NOT coalesce((build_metadata->>'cancel_requested')::boolean, false)`, taskID)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// stopGeneration ends a generation whose cancel was asked before batch
// batch started.
func (s *Service) stopGeneration(ctx context.Context, datasetID string, batch int) error {
	_, err := s.pool.Exec(ctx, `UPDATE evaluation_datasets SET build_metadata = build_metadata ||
		jsonb_build_object('status', 'cancelled', 'message', '已取消（已生成 ' || item_count || ' 项）'), updated_at = now()
		WHERE dataset_id = $1 AND generation_batch = $2 AND build_metadata->>'status' IN ('pending', 'running')`, datasetID, batch)
	return err
}
