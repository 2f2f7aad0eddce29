package run

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// NewToolCall is a tool call produced by a model turn.
type NewToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// StepCommit is the outcome of one model turn, committed at most once.
type StepCommit struct {
	Run       Run
	StepNo    int
	Owner     Owner
	StartedAt time.Time

	Content   string
	Reasoning string
	ToolCalls []NewToolCall
	// StreamMessageID is the attempt-scoped id the turn's tokens were streamed under.
	StreamMessageID string
	ModelSpec       string
	StepUsage       json.RawMessage
	TokenUsage      json.RawMessage // the run's cumulative usage after this step
	// Partial marks a turn cut short by cancellation.
	Partial bool
}

// Step outcomes.
const (
	OutcomeTools     = "tools"     // tool calls fanned out; the last one to finish readies the next step
	OutcomeCompleted = "completed" // the model answered without tool calls: the run completed
	OutcomeCancelled = "cancelled" // the run was cancelled: it ended at this boundary
)

// StepResult reports what a committed step did.
type StepResult struct {
	Outcome   string
	MessageID int64
	Run       Run
	ToolCalls []NewToolCall
}

// CommitStep writes the step record, the assistant message, its tool calls
// and the resulting events in one transaction. ErrDuplicateStep when the step
// was already committed; ErrLeaseLost when the caller's attempt no longer owns
// the run.
func (s *Store) CommitStep(ctx context.Context, c StepCommit) (StepResult, error) {
	var res StepResult
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		tag, err := tx.Exec(ctx, `INSERT INTO agent_run_steps (run_id, step_no, attempt_no, outcome, started_at, usage)
			VALUES ($1, $2, $3, 'pending', $4, $5) ON CONFLICT DO NOTHING`,
			c.Run.ID, c.StepNo, c.Owner.Attempt, c.StartedAt, nullJSON(c.StepUsage))
		if err != nil {
			return fmt.Errorf("record step: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return ErrDuplicateStep
		}
		var status string
		err = tx.QueryRow(ctx, `SELECT status FROM agent_runs WHERE id = $1 AND worker_id = $2 AND attempt_count = $3
			AND status IN ('running', 'cancel_requested') FOR UPDATE`, c.Run.ID, c.Owner.Worker, c.Owner.Attempt).Scan(&status)
		if err == pgx.ErrNoRows {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		meta := map[string]any{
			"step_no":           c.StepNo,
			"attempt":           c.Owner.Attempt,
			"stream_message_id": c.StreamMessageID,
			"model_spec":        c.ModelSpec,
		}
		if c.Reasoning != "" {
			meta["reasoning_content"] = c.Reasoning
		}
		if c.Partial {
			meta["partial"] = true
		}
		if len(c.StepUsage) > 0 {
			meta["usage"] = json.RawMessage(c.StepUsage)
		}
		metaJSON, _ := json.Marshal(meta)
		msgType := "text"
		if len(c.ToolCalls) > 0 {
			msgType = "tool_call"
		}
		if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, run_id, request_id, transcript_seq)
			VALUES ($1, 'assistant', $2, $3, $4, $5, $6, nextval('transcript_seq')) RETURNING id`,
			c.Run.ConversationID, c.Content, msgType, metaJSON, c.Run.ID, c.Run.RequestID).Scan(&res.MessageID); err != nil {
			return fmt.Errorf("insert assistant message: %w", err)
		}
		toolStatus := "pending"
		if status == StatusCancelRequested {
			toolStatus = "cancelled"
		}
		for i, tc := range c.ToolCalls {
			if _, err := tx.Exec(ctx, `INSERT INTO tool_calls (run_id, step_no, message_id, call_index, tool_call_id, tool_name, tool_input, status)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, c.Run.ID, c.StepNo, res.MessageID, i, tc.ID, tc.Name, tc.Arguments, toolStatus); err != nil {
				return fmt.Errorf("insert tool call %s: %w", tc.ID, err)
			}
		}
		res.ToolCalls = c.ToolCalls
		step := c.StepNo
		switch {
		case status == StatusCancelRequested:
			res.Outcome = OutcomeCancelled
			r, _, err := finishTx(ctx, tx, emit, c.Run.ID, Finish{Status: StatusCancelled, ErrorType: "cancelled",
				ErrorMessage: "the run was cancelled", OutputMessageID: &res.MessageID, StepCount: &step, TokenUsage: c.TokenUsage, Owner: &c.Owner})
			if err != nil {
				return err
			}
			res.Run = r
		case len(c.ToolCalls) > 0:
			res.Outcome = OutcomeTools
			r, err := scanRun(tx.QueryRow(ctx, `UPDATE agent_runs SET step_count = $2, token_usage = coalesce($3, token_usage),
				worker_id = NULL, lease_expires_at = NULL, last_progress_at = clock_timestamp(), updated_at = clock_timestamp()
				WHERE id = $1 RETURNING `+runCols, c.Run.ID, step, nullJSON(c.TokenUsage)))
			if err != nil {
				return err
			}
			res.Run = r
			if _, err := tx.Exec(ctx, `UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = 'step_committed'
				WHERE run_id = $1 AND attempt_no = $2`, c.Run.ID, c.Owner.Attempt); err != nil {
				return err
			}
			pending := make([]outbox.Pending, 0, len(c.ToolCalls))
			for _, tc := range c.ToolCalls {
				pending = append(pending, outbox.Pending{
					Payload:   events.ToolCallRequested{RunID: c.Run.ID, ThreadID: c.Run.ThreadID, StepNo: step, ToolCallID: tc.ID},
					DedupeKey: "tool:" + c.Run.ID + ":" + tc.ID,
				})
			}
			if err := emit(pending...); err != nil {
				return err
			}
		default:
			res.Outcome = OutcomeCompleted
			r, changed, err := finishTx(ctx, tx, emit, c.Run.ID, Finish{Status: StatusCompleted, OutputMessageID: &res.MessageID,
				StepCount: &step, TokenUsage: c.TokenUsage, Owner: &c.Owner})
			if err != nil {
				return err
			}
			if !changed {
				return ErrLeaseLost
			}
			res.Run = r
		}
		_, err = tx.Exec(ctx, `UPDATE agent_run_steps SET outcome = $3, assistant_message_id = $4, tool_call_count = $5, pending_tools = $6
			WHERE run_id = $1 AND step_no = $2`, c.Run.ID, c.StepNo, res.Outcome, res.MessageID, len(c.ToolCalls), pendingCount(res.Outcome, len(c.ToolCalls)))
		return err
	})
	return res, err
}

func pendingCount(outcome string, n int) int {
	if outcome == OutcomeTools {
		return n
	}
	return 0
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// Usage is one model call's token usage.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	TotalTokens  int64
	Reported     bool
}

type usageTotals struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

type modelUsage struct {
	usageTotals
	CallCount int `json:"call_count"`
}

// TokenUsage is agent_runs.token_usage (schema_version 2, as the original).
type TokenUsage struct {
	SchemaVersion             int                   `json:"schema_version"`
	ModelCallCount            int                   `json:"model_call_count"`
	UsageReportedCallCount    int                   `json:"usage_reported_call_count"`
	UsageUnavailableCallCount int                   `json:"usage_unavailable_call_count"`
	Complete                  bool                  `json:"complete"`
	Models                    map[string]modelUsage `json:"models"`
	Total                     usageTotals           `json:"total"`
}

// AddUsage folds one model call into the run's cumulative usage document.
func AddUsage(prev json.RawMessage, spec string, u Usage) json.RawMessage {
	t := TokenUsage{SchemaVersion: 2, Models: map[string]modelUsage{}, Complete: true}
	if len(prev) > 0 && string(prev) != "null" {
		_ = json.Unmarshal(prev, &t)
		if t.Models == nil {
			t.Models = map[string]modelUsage{}
		}
	}
	t.ModelCallCount++
	if u.Reported {
		t.UsageReportedCallCount++
		m := t.Models[spec]
		m.InputTokens += u.InputTokens
		m.OutputTokens += u.OutputTokens
		m.TotalTokens += u.TotalTokens
		m.CallCount++
		t.Models[spec] = m
		t.Total.InputTokens += u.InputTokens
		t.Total.OutputTokens += u.OutputTokens
		t.Total.TotalTokens += u.TotalTokens
	} else {
		t.UsageUnavailableCallCount++
	}
	t.Complete = t.UsageUnavailableCallCount == 0
	b, _ := json.Marshal(t)
	return b
}
