package run

import (
	"context"
	"encoding/json"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// OnceAppender appends an event to a run's stream at most once per key.
type OnceAppender interface {
	AppendOnce(ctx context.Context, runID, threadID, onceKey, event string, payload any) (string, bool, error)
}

// EndEvents writes the closing events of a terminal run to its stream:
// interrupt (cancelled, or interrupted with the questions asked), error
// (failed), then exactly one end. Every event is keyed, so calling it again
// — from the step that ended the run or from a recovery path — adds nothing.
func EndEvents(ctx context.Context, st OnceAppender, db postgres.DB, r Run) error {
	ctx = context.WithoutCancel(ctx)
	errType, errMsg := "", ""
	if r.ErrorType != nil {
		errType = *r.ErrorType
	}
	if r.ErrorMessage != nil {
		errMsg = *r.ErrorMessage
	}
	base := map[string]any{"request_id": r.RequestID, "thread_id": r.ThreadID}
	with := func(kv map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	switch r.Status {
	case StatusCancelled:
		chunk := with(map[string]any{"status": "cancelled", "message": errMsg})
		if _, _, err := st.AppendOnce(ctx, r.ID, r.ThreadID, "interrupt", "interrupt", map[string]any{"reason": "cancelled", "chunk": chunk}); err != nil {
			return err
		}
	case StatusInterrupted:
		calls, err := InterruptedCalls(ctx, db, r.ID)
		if err != nil {
			return err
		}
		var questions []json.RawMessage
		toolCallIDs := []string{}
		for _, c := range calls {
			toolCallIDs = append(toolCallIDs, c.ToolCallID)
			var stored struct {
				Questions []json.RawMessage `json:"questions"`
			}
			if c.Output != nil && json.Unmarshal([]byte(*c.Output), &stored) == nil {
				questions = append(questions, stored.Questions...)
			}
		}
		if questions == nil {
			questions = []json.RawMessage{}
		}
		chunk := with(map[string]any{"status": errType, "questions": questions, "tool_call_ids": toolCallIDs,
			"message": errMsg, "source": "ask_user_question"})
		if _, _, err := st.AppendOnce(ctx, r.ID, r.ThreadID, "interrupt", "interrupt", map[string]any{"reason": errType, "chunk": chunk}); err != nil {
			return err
		}
	case StatusFailed:
		chunk := with(map[string]any{"status": "error", "error_type": errType, "error_message": errMsg, "retryable": false})
		if _, _, err := st.AppendOnce(ctx, r.ID, r.ThreadID, "error", "error", map[string]any{"chunk": chunk, "retryable": false}); err != nil {
			return err
		}
	}
	_, _, err := st.AppendOnce(ctx, r.ID, r.ThreadID, "end", "end", map[string]any{"status": r.Status, "request_id": r.RequestID})
	return err
}
