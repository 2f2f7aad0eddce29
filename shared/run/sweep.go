package run

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// SweepConfig tunes recovery.
type SweepConfig struct {
	// Stale is how long a run may make no progress between steps (tools
	// running, or a step event not yet claimed) before it is re-driven.
	Stale time.Duration
	// MaxRecoveries bounds re-drives of one run; then it fails with
	// worker_lease_expired.
	MaxRecoveries int
	Batch         int
}

// RecoveryAction is what the sweep did to one run.
type RecoveryAction string

// Recovery actions.
const (
	RecoveryRedriveStep  RecoveryAction = "redrive_step"  // the step event was redelivered
	RecoveryRedriveTools RecoveryAction = "redrive_tools" // the step's pending tool calls were redelivered
	RecoveryCancelled    RecoveryAction = "cancelled"     // a cancel_requested run whose worker died ended cancelled
	RecoveryFailed       RecoveryAction = "failed"        // re-driven too often: the run failed with worker_lease_expired
)

// Recovery says what the sweep did to one run.
type Recovery struct {
	RunID  string
	Action RecoveryAction
	Run    Run
}

// RecoverStuck re-drives runs whose worker died: an expired step lease, or no
// progress for cfg.Stale between steps. The step is redelivered (its claim
// finds the lease free) or the pending tool calls are redelivered; a run
// re-driven too often fails; a cancel_requested run whose worker died ends
// cancelled. The streams of runs it ended are closed after the commit. Safe
// to run concurrently (rows are taken with SKIP LOCKED).
func (s *Store) RecoverStuck(ctx context.Context, cfg SweepConfig) ([]Recovery, error) {
	if cfg.Stale <= 0 {
		cfg.Stale = 2 * time.Minute
	}
	if cfg.MaxRecoveries <= 0 {
		cfg.MaxRecoveries = 5
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	var out []Recovery
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		rows, err := tx.Query(ctx, `SELECT `+runCols+` FROM agent_runs
			WHERE status IN ('pending', 'running', 'cancel_requested')
			  AND ((worker_id IS NOT NULL AND lease_expires_at < clock_timestamp())
			    OR (worker_id IS NULL AND last_progress_at < clock_timestamp() - $1::interval
			        -- a parent whose tool call waits for a live sub-agent run is not stuck:
			        -- the child's run.finished completes the call (the child is swept itself)
			        AND NOT EXISTS (SELECT 1 FROM agent_runs c WHERE c.created_by_run_id = agent_runs.id
			            AND c.run_type = 'subagent' AND c.status IN ('pending', 'running', 'cancel_requested'))))
			ORDER BY last_progress_at LIMIT $2 FOR UPDATE SKIP LOCKED`, cfg.Stale.String(), cfg.Batch)
		if err != nil {
			return err
		}
		var stuck []Run
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				rows.Close()
				return err
			}
			stuck = append(stuck, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range stuck {
			rec, err := recoverOne(ctx, tx, emit, r, cfg)
			if err != nil {
				return fmt.Errorf("recover run %s: %w", r.ID, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err == nil {
		for _, rec := range out {
			if rec.Action == RecoveryCancelled || rec.Action == RecoveryFailed {
				s.closed(ctx, rec.Run)
			}
		}
	}
	return out, err
}

func recoverOne(ctx context.Context, tx pgx.Tx, emit outbox.Emit, r Run, cfg SweepConfig) (Recovery, error) {
	rec := Recovery{RunID: r.ID}
	if r.Status == StatusCancelRequested {
		fr, _, err := finishTx(ctx, tx, emit, r.ID, Finish{Status: StatusCancelled, ErrorType: "cancelled", ErrorMessage: "the run was cancelled"})
		rec.Action, rec.Run = RecoveryCancelled, fr
		return rec, err
	}
	if r.RecoveryCount >= cfg.MaxRecoveries {
		fr, _, err := finishTx(ctx, tx, emit, r.ID, Finish{Status: StatusFailed, ErrorType: "worker_lease_expired",
			ErrorMessage: fmt.Sprintf("the run made no progress after %d recoveries", r.RecoveryCount)})
		rec.Action, rec.Run = RecoveryFailed, fr
		return rec, err
	}
	n := r.RecoveryCount + 1
	if _, err := tx.Exec(ctx, `UPDATE agent_runs SET recovery_count = $2, worker_id = NULL, lease_expires_at = NULL,
		last_progress_at = clock_timestamp(), updated_at = clock_timestamp() WHERE id = $1`, r.ID, n); err != nil {
		return rec, err
	}
	if _, err := tx.Exec(ctx, `UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = 'lease_expired'
		WHERE run_id = $1 AND finished_at IS NULL`, r.ID); err != nil {
		return rec, err
	}
	rec.Run = r
	pending, err := pendingToolCalls(ctx, tx, r.ID, r.StepCount)
	if err != nil {
		return rec, err
	}
	// Step 0 of a resume run holds the calls its resume approved.
	if len(pending) > 0 {
		rec.Action = RecoveryRedriveTools
		for _, c := range pending {
			if err := emit(outbox.Pending{
				Payload:   events.ToolCallRequested{RunID: r.ID, ThreadID: r.ThreadID, StepNo: c.StepNo, ToolCallID: c.ToolCallID},
				DedupeKey: fmt.Sprintf("tool:%s:%s:r%d", r.ID, c.ToolCallID, n),
			}); err != nil {
				return rec, err
			}
		}
		return rec, nil
	}
	rec.Action = RecoveryRedriveStep
	return rec, emit(outbox.Pending{
		Payload:   events.StepReady{RunID: r.ID, ThreadID: r.ThreadID, StepNo: r.StepCount + 1},
		DedupeKey: fmt.Sprintf("step:%s:%d:r%d", r.ID, r.StepCount+1, n),
	})
}
