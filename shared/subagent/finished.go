package subagent

import (
	"context"
	"errors"
	"fmt"

	"github.com/yuxi-serverless/yuxi/shared/run"
)

// RunFinished is the dispatcher's hook on run.finished (after the run's
// stream is closed). For a sub-agent run it records the result of every
// parent tool call waiting for it (task, subagent_await): the last one of a
// step readies the parent's next step, so the parent goes on without any
// function having waited. For a main run that ended other than completed it
// cancels the sub-agent runs still active. Idempotent: a recorded call is a
// duplicate, a cancelled child is a no-op.
func (s *Service) RunFinished(ctx context.Context, r run.Run) error {
	if r.RunType == run.TypeSubagent {
		return s.completeWaits(ctx, r)
	}
	if r.Status == run.StatusCompleted {
		return nil // background children may go on; a later turn can await them
	}
	children, err := s.d.Runs.ActiveChildren(ctx, r.ID)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range children {
		cr, outcome, err := s.d.Runs.RequestCancel(ctx, c.UID, c.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if outcome == run.CancelRequested && s.d.Cancel != nil {
			_ = s.d.Cancel.SignalCancel(ctx, cr.ID)
		}
	}
	return errors.Join(errs...)
}

func (s *Service) completeWaits(ctx context.Context, child run.Run) error {
	rows, err := s.d.Pool.Query(ctx, `SELECT w.parent_run_id, w.tool_call_id FROM subagent_waits w
		JOIN tool_calls t ON t.run_id = w.parent_run_id AND t.tool_call_id = w.tool_call_id
		WHERE w.child_run_id = $1 AND t.status = 'pending' ORDER BY w.created_at`, child.ID)
	if err != nil {
		return fmt.Errorf("waits on sub-agent run %s: %w", child.ID, err)
	}
	type wait struct{ parent, call string }
	var waits []wait
	for rows.Next() {
		var w wait
		if err := rows.Scan(&w.parent, &w.call); err != nil {
			rows.Close()
			return err
		}
		waits = append(waits, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(waits) == 0 {
		return err
	}
	out, isErr, err := s.Outcome(ctx, child)
	if err != nil {
		return err
	}
	res := run.ToolResult{Status: run.ToolSuccess, Output: out}
	if isErr {
		res.Status, res.Error = run.ToolError, out
	}
	for _, w := range waits {
		res.RunID, res.ToolCallID = w.parent, w.call
		if _, err := s.d.Runs.CompleteToolCall(ctx, res); err != nil {
			return fmt.Errorf("record sub-agent result for %s/%s: %w", w.parent, w.call, err)
		}
	}
	return nil
}
