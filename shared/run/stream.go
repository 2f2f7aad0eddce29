package run

import (
	"context"
	"encoding/json"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// StreamAppender appends events to a run's stream, keyed events at most once.
type StreamAppender interface {
	AppendOnceBatch(ctx context.Context, runID, threadID string, evs []runstream.OnceEvent) (int, error)
}

// EndEvents writes the closing events of a terminal run to its stream, after
// prelude (unkeyed events, e.g. the last message marker), in one round trip:
// interrupt (cancelled, or interrupted with the questions asked), error
// (failed), then exactly one end. The closing events are keyed, so calling it
// again — from the step that ended the run or from a recovery path — adds
// nothing but the prelude.
func EndEvents(ctx context.Context, st StreamAppender, db postgres.DB, r Run, prelude ...runstream.OnceEvent) error {
	ctx = context.WithoutCancel(ctx)
	errType, errMsg := "", ""
	if r.ErrorType != nil {
		errType = *r.ErrorType
	}
	if r.ErrorMessage != nil {
		errMsg = *r.ErrorMessage
	}
	chunk := func(kv map[string]any) map[string]any {
		out := map[string]any{"request_id": r.RequestID, "thread_id": r.ThreadID}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	evs := append([]runstream.OnceEvent(nil), prelude...)
	switch r.Status {
	case StatusCancelled:
		evs = append(evs, runstream.OnceEvent{OnceKey: "interrupt", Type: runstream.EventInterrupt, Payload: map[string]any{
			"reason": "cancelled", "chunk": chunk(map[string]any{"status": "cancelled", "message": errMsg})}})
	case StatusInterrupted:
		calls, err := InterruptedCalls(ctx, db, r.ID)
		if err != nil {
			return err
		}
		questions := []json.RawMessage{}
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
		evs = append(evs, runstream.OnceEvent{OnceKey: "interrupt", Type: runstream.EventInterrupt, Payload: map[string]any{
			"reason": errType, "chunk": chunk(map[string]any{"status": errType, "questions": questions,
				"tool_call_ids": toolCallIDs, "message": errMsg, "source": "ask_user_question"})}})
	case StatusFailed:
		evs = append(evs, runstream.OnceEvent{OnceKey: "error", Type: runstream.EventError, Payload: map[string]any{
			"chunk": chunk(map[string]any{"status": "error", "error_type": errType, "error_message": errMsg, "retryable": false}), "retryable": false}})
	}
	evs = append(evs, runstream.OnceEvent{OnceKey: "end", Type: runstream.EventEnd, Payload: map[string]any{"status": r.Status, "request_id": r.RequestID}})
	_, err := st.AppendOnceBatch(ctx, r.ID, r.ThreadID, evs)
	return err
}
