package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Entry is one message of the model-facing transcript.
type Entry struct {
	MessageID    int64
	Role         string // user | assistant | system
	Content      string
	ImageContent *string
	ToolCalls    []ToolCallEntry // assistant messages only, in call order
	// SteerRequestID is set on a steer of the parent's thread stored in a
	// sub-agent's transcript (StepCommit.Steers): the request it came from.
	SteerRequestID string
}

// Steer is a steer request of a thread, as a running sub-agent of the
// thread's run is shown it.
type Steer struct {
	RequestID string
	Content   string
}

// ToolCallEntry is a recorded tool call with its result (when finished).
type ToolCallEntry struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Input  string  `json:"input"`
	Output *string `json:"output"`
	Status string  `json:"status"`
	Error  *string `json:"error"`
}

// ResultText is what the model sees as the tool's answer. Calls that never
// finished (the run ended first) get an explicit note so the transcript stays
// valid for the provider.
func (t ToolCallEntry) ResultText() string {
	switch t.Status {
	case "success":
		if t.Output != nil {
			return *t.Output
		}
		return ""
	case "error":
		msg := "tool error"
		if t.Error != nil {
			msg = *t.Error
		}
		if t.Output != nil && *t.Output != "" {
			return *t.Output
		}
		return "Error: " + msg
	case "interrupted":
		return "The user has not answered yet."
	case "cancelled":
		return "The tool call was cancelled before it ran."
	default:
		return "The tool call did not finish because the run ended."
	}
}

// transcriptSQL selects a conversation's transcript; conversation is an SQL
// expression for its id (a parameter or a subquery).
func transcriptSQL(conversation string) string {
	return `
		SELECT m.id, m.role, m.content, m.image_content, coalesce(m.extra_metadata->>'steer_request_id', ''),
			coalesce((SELECT json_agg(json_build_object('id', tc.tool_call_id, 'name', tc.tool_name, 'input', tc.tool_input,
				'output', tc.tool_output, 'status', tc.status, 'error', tc.error_message) ORDER BY tc.call_index)
				FROM tool_calls tc WHERE tc.message_id = m.id), '[]'::json)
		FROM messages m
		WHERE m.conversation_id = ` + conversation + ` AND m.transcript_seq IS NOT NULL
		ORDER BY m.transcript_seq`
}

// Transcript loads the thread's transcript: every message that entered it, in
// order, with the tool calls of assistant messages and their results.
func (s *Store) Transcript(ctx context.Context, conversationID int64) ([]Entry, error) {
	return s.TranscriptTx(ctx, s.pool, conversationID)
}

// TranscriptTx is Transcript through tx.
func (s *Store) TranscriptTx(ctx context.Context, tx postgres.DB, conversationID int64) ([]Entry, error) {
	rows, err := tx.Query(ctx, transcriptSQL("$1"), conversationID)
	if err != nil {
		return nil, fmt.Errorf("load transcript: %w", err)
	}
	return scanTranscript(rows)
}

func scanTranscript(rows pgx.Rows) ([]Entry, error) {
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var calls []byte
		if err := rows.Scan(&e.MessageID, &e.Role, &e.Content, &e.ImageContent, &e.SteerRequestID, &calls); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(calls, &e.ToolCalls); err != nil {
			return nil, fmt.Errorf("decode tool calls of message %d: %w", e.MessageID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load transcript: %w", err)
	}
	return out, nil
}
