package thread

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
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
	out, _, err := s.history(ctx, uid, threadID, 0, 0)
	return out, err
}

// MaxHistoryPage bounds a history page's limit.
const MaxHistoryPage = 500

// ErrHistoryBefore refuses a page cursor that is not a message of the thread.
var ErrHistoryBefore = failure.Unprocessable("invalid_before", "before must be the id of a message of this thread's history")

// HistoryPage returns up to limit visible messages of uid's thread that
// come before message before (0: the newest), in transcript order, and
// whether older ones remain: a client shows a long thread's end first and
// loads older pages as the user scrolls up.
func (s *Store) HistoryPage(ctx context.Context, uid, threadID string, limit int, before int64) ([]HistoryItem, bool, error) {
	if limit < 1 || limit > MaxHistoryPage {
		return nil, false, failure.Unprocessable("invalid_limit", "limit must be between 1 and %d", MaxHistoryPage)
	}
	return s.history(ctx, uid, threadID, limit, before)
}

// history reads the visible messages; limit 0 reads them all.
func (s *Store) history(ctx context.Context, uid, threadID string, limit int, before int64) ([]HistoryItem, bool, error) {
	t, err := s.Get(ctx, uid, threadID)
	if err != nil {
		return nil, false, err
	}
	var beforeSeq *int64
	if before != 0 {
		if err := s.pool.QueryRow(ctx, `SELECT transcript_seq FROM messages WHERE id = $1 AND conversation_id = $2 AND transcript_seq IS NOT NULL`,
			before, t.ConversationID).Scan(&beforeSeq); err != nil || beforeSeq == nil {
			return nil, false, ErrHistoryBefore
		}
	}
	order, lim := "ASC", "ALL"
	if limit > 0 {
		order, lim = "DESC", fmt.Sprint(limit+1)
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
		WHERE m.conversation_id = $1 AND m.transcript_seq IS NOT NULL AND ($3::bigint IS NULL OR m.transcript_seq < $3)
		ORDER BY m.transcript_seq `+order+` LIMIT `+lim, t.ConversationID, uid, beforeSeq)
	if err != nil {
		return nil, false, fmt.Errorf("load history: %w", err)
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
			return nil, false, err
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
			return nil, false, err
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
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	more := false
	if limit > 0 {
		if more = len(out) > limit; more {
			out = out[:limit]
		}
		slices.Reverse(out)
	}
	return out, more, nil
}
