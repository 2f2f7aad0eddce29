package thread

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// HistoryToolCall is a tool call as the history shows it.
type HistoryToolCall struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Function       map[string]string `json:"function"`
	Args           any               `json:"args"`
	ToolCallResult *map[string]any   `json:"tool_call_result"`
	Status         string            `json:"status"`
	ErrorMessage   *string           `json:"error_message"`
}

// HistoryItem is one message of GET /api/chat/thread/{id}/history.
type HistoryItem struct {
	ID             int64             `json:"id"`
	Type           string            `json:"type"` // human | ai | tool | system
	Content        string            `json:"content"`
	CreatedAt      time.Time         `json:"created_at"`
	RunID          *string           `json:"run_id"`
	RequestID      *string           `json:"request_id"`
	DeliveryStatus *string           `json:"delivery_status"`
	ErrorType      *string           `json:"error_type"`
	ErrorMessage   *string           `json:"error_message"`
	ExtraMetadata  json.RawMessage   `json:"extra_metadata"`
	MessageType    string            `json:"message_type"`
	ImageContent   *string           `json:"image_content"`
	Feedback       any               `json:"feedback"`
	RunStartedAt   *time.Time        `json:"run_started_at,omitempty"`
	RunFinishedAt  *time.Time        `json:"run_finished_at,omitempty"`
	ToolCalls      []HistoryToolCall `json:"tool_calls"`
}

var roleType = map[string]string{"user": "human", "assistant": "ai", "tool": "tool", "system": "system"}

// History returns the visible messages of uid's thread in transcript order.
// Messages that never reached the model (queued, cancelled while queued,
// rejected) and resume answers are not shown.
func (s *Store) History(ctx context.Context, uid, threadID string) ([]HistoryItem, error) {
	t, err := s.Get(ctx, uid, threadID)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT m.id, m.role, m.content, m.created_at, m.run_id, m.request_id, m.delivery_status, m.extra_metadata,
			m.message_type, m.image_content, r.status, r.error_type, r.error_message, r.started_at, r.finished_at,
			coalesce((SELECT json_agg(json_build_object('id', tc.tool_call_id, 'name', tc.tool_name, 'input', tc.tool_input,
				'output', tc.tool_output, 'status', tc.status, 'error', tc.error_message) ORDER BY tc.call_index)
				FROM tool_calls tc WHERE tc.message_id = m.id), '[]'::json),
			(SELECT json_build_object('id', f.id, 'rating', f.rating, 'reason', f.reason, 'created_at', f.created_at)
				FROM message_feedbacks f WHERE f.message_id = m.id AND f.uid = $2)
		FROM messages m LEFT JOIN agent_runs r ON r.id = m.run_id
		WHERE m.conversation_id = $1 AND m.transcript_seq IS NOT NULL
		ORDER BY m.transcript_seq`, t.ConversationID, uid)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	defer rows.Close()
	out := []HistoryItem{}
	for rows.Next() {
		var (
			h                     HistoryItem
			role                  string
			runStatus             *string
			runErrType, runErrMsg *string
			started, finished     *time.Time
			calls, feedback       []byte
		)
		if err := rows.Scan(&h.ID, &role, &h.Content, &h.CreatedAt, &h.RunID, &h.RequestID, &h.DeliveryStatus, &h.ExtraMetadata,
			&h.MessageType, &h.ImageContent, &runStatus, &runErrType, &runErrMsg, &started, &finished, &calls, &feedback); err != nil {
			return nil, err
		}
		h.Type = roleType[role]
		if feedback != nil {
			h.Feedback = json.RawMessage(feedback)
		}
		if runStatus != nil && (*runStatus == "failed" || *runStatus == "cancelled") {
			h.ErrorType, h.ErrorMessage = runErrType, runErrMsg
		}
		if role == "assistant" {
			h.RunStartedAt, h.RunFinishedAt = started, finished
		}
		var raw []struct {
			ID     string  `json:"id"`
			Name   string  `json:"name"`
			Input  string  `json:"input"`
			Output *string `json:"output"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		if err := json.Unmarshal(calls, &raw); err != nil {
			return nil, err
		}
		h.ToolCalls = make([]HistoryToolCall, 0, len(raw))
		for _, c := range raw {
			var args any = c.Input
			var parsed any
			if json.Unmarshal([]byte(c.Input), &parsed) == nil {
				args = parsed
			}
			hc := HistoryToolCall{ID: c.ID, Name: c.Name, Function: map[string]string{"name": c.Name}, Args: args, Status: c.Status, ErrorMessage: c.Error}
			if c.Output != nil {
				res := map[string]any{"content": *c.Output}
				hc.ToolCallResult = &res
			}
			h.ToolCalls = append(h.ToolCalls, hc)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}
