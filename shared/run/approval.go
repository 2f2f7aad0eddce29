package run

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Tool approval in the run's terms (the policy is shared/approval's):
//
//   - tool-invoke records a call that needs approval as interrupted, its
//     output an approval.Pending (the call did not run); the run ends
//     interrupted (error_type human_approval_required) like a question.
//   - StartResumeTx, in the resume's transaction, applies the decisions:
//     a rejected call gets the refusal as its result (status error); an
//     approved call moves to the resume run as step 0 (status pending, its
//     output the Pending with decision approve) and the resume run starts
//     with its tool call events instead of step 1. tool-invoke runs it
//     exactly like any call (at-least-once, idempotent by tool call id; the
//     sweep redrives it if its invocation dies); its fan-in readies step 1.
//     The call keeps its assistant message, so the transcript is unchanged.
//   - an expired approval refuses the resume (approval.ErrExpired) and is
//     resolved as rejected by the thread's next message
//     (ResolveExpiredApprovalsTx).

// approvalStepOutcome marks the step 0 of a resume run that runs approved calls.
const approvalStepOutcome = "approved_tools"

// StartResumeTx answers the interrupted calls of parentID with resume inside
// the caller's transaction (the resume run resumed already exists in it) and
// emits the resume run's first event: the approved calls' tool events, or
// step 1. Errors are the resume's machine-readable refusals (approval
// package) or infrastructure errors; either rolls the transaction back.
func (s *Store) StartResumeTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, parentID string, resumed Run, resume json.RawMessage) error {
	calls, err := s.InterruptedCallsTx(ctx, tx, parentID)
	if err != nil {
		return err
	}
	decisions, hasDecisions, err := approval.Decisions(resume)
	if err != nil {
		return err
	}
	var waiting []ToolCall
	var pending []approval.Pending
	var questions []ToolCall
	for _, c := range calls {
		if p, ok := approval.Parse(c.Output); ok {
			waiting, pending = append(waiting, c), append(pending, p)
		} else {
			questions = append(questions, c)
		}
	}
	switch {
	case len(waiting) > 0 && !hasDecisions:
		return approval.ErrDecisionsRequired
	case len(waiting) == 0 && hasDecisions && len(questions) > 0:
		return approval.ErrNoPendingApproval
	}
	if len(waiting) > 0 {
		if decisions, err = approval.Match(decisions, len(waiting)); err != nil {
			return err
		}
		now := time.Now()
		for i, p := range pending {
			if now.After(p.ExpiresAt) {
				return approval.ErrExpired.With(map[string]any{"run_id": parentID, "tool_call_id": waiting[i].ToolCallID,
					"expired_at": p.ExpiresAt})
			}
		}
	}
	for _, c := range questions {
		if err := answerQuestionTx(ctx, tx, c, resume); err != nil {
			return err
		}
	}
	var approved []ToolCall
	for i, c := range waiting {
		d := decisions[i]
		if d.Type == approval.Reject {
			if _, err := tx.Exec(ctx, `UPDATE tool_calls SET status = 'error', tool_output = $2, error_message = 'rejected by the user',
				finished_at = clock_timestamp() WHERE id = $1 AND status = 'interrupted'`, c.ID, approval.RejectedText(c.Name, d.Message)); err != nil {
				return fmt.Errorf("reject tool call %s: %w", c.ToolCallID, err)
			}
			continue
		}
		p := pending[i]
		at := time.Now().UTC()
		p.Decision, p.DecidedAt, p.ResumeRunID = approval.Approve, &at, resumed.ID
		doc, _ := json.Marshal(p)
		if _, err := tx.Exec(ctx, `UPDATE tool_calls SET run_id = $2, step_no = 0, status = 'pending', tool_output = $3,
			error_message = NULL, finished_at = NULL WHERE id = $1 AND status = 'interrupted'`, c.ID, resumed.ID, string(doc)); err != nil {
			return fmt.Errorf("approve tool call %s: %w", c.ToolCallID, err)
		}
		approved = append(approved, c)
	}
	if len(approved) == 0 {
		return emit(outbox.Pending{Payload: events.StepReady{RunID: resumed.ID, ThreadID: resumed.ThreadID, StepNo: 1},
			DedupeKey: "step:" + resumed.ID + ":1"})
	}
	if _, err := tx.Exec(ctx, `INSERT INTO agent_run_steps (run_id, step_no, attempt_no, tool_call_count, pending_tools, outcome, started_at)
		VALUES ($1, 0, 0, $2, $2, $3, clock_timestamp())`, resumed.ID, len(approved), approvalStepOutcome); err != nil {
		return fmt.Errorf("open approved tools step: %w", err)
	}
	for _, c := range approved {
		if err := emit(outbox.Pending{
			Payload:   events.ToolCallRequested{RunID: resumed.ID, ThreadID: resumed.ThreadID, StepNo: 0, ToolCallID: c.ToolCallID},
			DedupeKey: "tool:" + resumed.ID + ":" + c.ToolCallID,
		}); err != nil {
			return err
		}
	}
	return nil
}

// answerQuestionTx records the user's answer as the result of a call that
// asked questions: {"questions": …, "answer": answer}.
func answerQuestionTx(ctx context.Context, tx pgx.Tx, c ToolCall, answer json.RawMessage) error {
	var stored struct {
		Questions json.RawMessage `json:"questions"`
	}
	if c.Output != nil {
		_ = json.Unmarshal([]byte(*c.Output), &stored)
	}
	if len(stored.Questions) == 0 {
		stored.Questions = json.RawMessage("[]")
	}
	out, err := jsonNoEscape(map[string]json.RawMessage{"questions": stored.Questions, "answer": answer})
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE tool_calls SET status = 'success', tool_output = $2, finished_at = clock_timestamp()
		WHERE id = $1 AND status = 'interrupted'`, c.ID, out)
	return err
}

// ResolveExpiredApprovalsTx resolves, through db (inside the caller's
// transaction, which holds the thread's lock), the calls of interrupted run
// runID when every one of them is a tool approval that expired: each gets
// the expiry notice as its result (status error) and true is returned — the
// thread takes new messages again. Otherwise nothing changes (false).
func (s *Store) ResolveExpiredApprovalsTx(ctx context.Context, db postgres.DB, runID string) (bool, error) {
	calls, err := s.InterruptedCallsTx(ctx, db, runID)
	if err != nil || !ApprovalsExpired(calls, time.Now()) {
		return false, err
	}
	for _, c := range calls {
		p, _ := approval.Parse(c.Output)
		if _, err := db.Exec(ctx, `UPDATE tool_calls SET status = 'error', tool_output = $2, error_message = 'approval expired',
			finished_at = clock_timestamp() WHERE id = $1 AND status = 'interrupted'`, c.ID, approval.ExpiredText(c.Name, p.ExpiresAt)); err != nil {
			return false, fmt.Errorf("expire approval of %s: %w", c.ToolCallID, err)
		}
	}
	return true, nil
}

// ApprovalsExpired reports whether the waiting calls of an interrupted run
// (InterruptedCalls) are all tool approvals whose time ran out at now: such
// a run no longer holds its thread, and the next message resolves them as
// rejected (ResolveExpiredApprovalsTx).
func ApprovalsExpired(calls []ToolCall, now time.Time) bool {
	if len(calls) == 0 {
		return false
	}
	for _, c := range calls {
		p, ok := approval.Parse(c.Output)
		if !ok || !now.After(p.ExpiresAt) {
			return false
		}
	}
	return true
}

// approvalChunk is the approval object of an interrupted run's stream
// event: the action requests and review configs of every call waiting for
// approval, and when the first of them expires. nil when none waits.
func approvalChunk(calls []ToolCall) json.RawMessage {
	var all approval.Approval
	var expires *time.Time
	for _, c := range calls {
		p, ok := approval.Parse(c.Output)
		if !ok {
			continue
		}
		all.ActionRequests = append(all.ActionRequests, p.Approval.ActionRequests...)
		all.ReviewConfigs = append(all.ReviewConfigs, p.Approval.ReviewConfigs...)
		if expires == nil || p.ExpiresAt.Before(*expires) {
			e := p.ExpiresAt
			expires = &e
		}
	}
	if expires == nil {
		return nil
	}
	b, _ := json.Marshal(struct {
		approval.Approval
		ExpiresAt time.Time `json:"expires_at"`
	}{all, *expires})
	return b
}
