// Package compaction keeps long runs inside the model's context, as the
// original's summary middleware does, on the durable step model:
//
//   - Estimate: an approximate token count (not the provider's usage) decides.
//   - L1 (Trim): before a model call, a temporary view replaces older large
//     tool results and tool-call arguments by a marked preview of
//     summary_tool_result_token_limit tokens. Stored messages never change.
//   - L2 (a summary turn): when the L1 view is still over summary_threshold ×
//     summary_l2_trigger_ratio, the model summarises the older part of the
//     thread (all but the newest summary_keep_messages entries); the summary
//     is stored once per (run, step) — the turn is checkpointed, a retried step
//     reuses it — and replaces those messages in every later effective
//     context.
//
// Owns the table context_summaries.
//
// Imported by: functions/agent-step, shared/bootstrap, tests.
// May import: shared/llm, shared/agent, shared/postgres, pgx.
package compaction

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// EstimateText approximates the tokens of s: a quarter token per ASCII byte,
// one per other character (CJK text is about a token a character).
func EstimateText(s string) int {
	ascii, other := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+3)/4 + other
}

// Estimate approximates the tokens of msgs (content, tool call arguments
// and a small overhead per message).
func Estimate(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += 4 + EstimateText(m.Content)
		for _, c := range m.ToolCalls {
			n += 4 + EstimateText(c.Name) + EstimateText(c.Arguments)
		}
	}
	return n
}

// Trim is L1: a copy of msgs in which every tool result and tool-call
// argument older than the last `recent` messages and over limit tokens is
// replaced by a marked preview of limit tokens. msgs is not changed.
func Trim(msgs []llm.Message, limit, recent int) ([]llm.Message, int) {
	out := make([]llm.Message, len(msgs))
	copy(out, msgs)
	trimmed := 0
	if limit <= 0 {
		return out, 0
	}
	for i := 0; i < len(out)-recent; i++ {
		m := out[i]
		switch {
		case m.Role == llm.RoleTool && EstimateText(m.Content) > limit:
			out[i].Content = preview(m.Content, limit, "tool result")
			trimmed++
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			var calls []llm.ToolCall
			for _, c := range m.ToolCalls {
				if EstimateText(c.Arguments) > limit {
					if calls == nil {
						calls = append([]llm.ToolCall(nil), m.ToolCalls...)
					}
					b, _ := jsonString(preview(c.Arguments, limit, "tool arguments"))
					for j := range calls {
						if calls[j].ID == c.ID {
							calls[j].Arguments = `{"_trimmed":` + b + `}`
						}
					}
					trimmed++
				}
			}
			if calls != nil {
				out[i].ToolCalls = calls
			}
		}
	}
	return out, trimmed
}

// preview keeps about limit tokens of s and says what was left out.
func preview(s string, limit int, what string) string {
	total := EstimateText(s)
	cut, n := 0, 0
	for i, r := range s {
		if r < utf8.RuneSelf {
			n++
		} else {
			n += 4
		}
		if n/4 >= limit {
			cut = i
			break
		}
		cut = i + utf8.RuneLen(r)
	}
	return fmt.Sprintf("[%s trimmed for context: about %d tokens; preview follows]\n%s\n[… %d tokens not shown]", what, total, s[:cut], total-EstimateText(s[:cut]))
}

func jsonString(s string) (string, error) {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// Threshold is the token count above which cfg compresses (0: never).
func Threshold(cfg agent.Summary) int { return cfg.ThresholdK * 1000 }

// Summarise asks model for a summary of msgs (the L1 view of the older
// part, after a previous summary if any), keeping at most the threshold's
// tokens of input (the newest), and asking for at most maxTokens of answer
// (0: no cap). Deltas are not streamed to anyone.
func Summarise(ctx context.Context, model llm.ChatModel, modelID string, cfg agent.Summary, msgs []llm.Message, maxTokens int64) (string, llm.Usage, error) {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleSystem:
			continue
		case llm.RoleTool:
			fmt.Fprintf(&b, "[tool result %s]\n%s\n\n", m.ToolCallID, m.Content)
		default:
			fmt.Fprintf(&b, "[%s]\n%s\n", m.Role, m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "(called %s %s)\n", c.Name, c.Arguments)
			}
			b.WriteString("\n")
		}
	}
	text := b.String()
	if max := Threshold(cfg); max > 0 && EstimateText(text) > max {
		text = keepTail(text, max)
	}
	resp, err := model.Stream(ctx, llm.Request{Model: modelID, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: cfg.Prompt},
		{Role: llm.RoleUser, Content: "Conversation to summarise:\n\n" + text},
	}, MaxTokens: maxTokens}, func(llm.Delta) error { return nil })
	if err != nil {
		return "", llm.Usage{}, err
	}
	if strings.TrimSpace(resp.Content) == "" {
		return "", resp.Usage, errors.New("the summary model answered nothing")
	}
	return resp.Content, resp.Usage, nil
}

// keepTail keeps the last ~max tokens of s.
func keepTail(s string, max int) string {
	n := 0
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if r < utf8.RuneSelf {
			n++
		} else {
			n += 4
		}
		i -= size
		if n/4 >= max {
			return "[… earlier part omitted]\n" + s[i:]
		}
	}
	return s
}

// Summary is a stored L2 summary.
type Summary struct {
	ConversationID int64
	RunID          string
	StepNo         int
	UptoMessageID  int64 // the newest transcript message it replaces
	Content        string
	TokensBefore   int
	TokensAfter    int
}

// Store keeps summaries in Postgres.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns the store.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Latest returns the newest summary of a thread, or nil.
func (s *Store) Latest(ctx context.Context, conversationID int64) (*Summary, error) {
	return s.one(ctx, `WHERE conversation_id = $1 ORDER BY id DESC LIMIT 1`, conversationID)
}

// ForStep returns the summary made by (run, step), or nil.
func (s *Store) ForStep(ctx context.Context, runID string, stepNo int) (*Summary, error) {
	return s.one(ctx, `WHERE run_id = $1 AND step_no = $2`, runID, stepNo)
}

func (s *Store) one(ctx context.Context, where string, args ...any) (*Summary, error) {
	var x Summary
	err := s.pool.QueryRow(ctx, `SELECT conversation_id, run_id, step_no, upto_message_id, content, tokens_before, tokens_after
		FROM context_summaries `+where, args...).Scan(&x.ConversationID, &x.RunID, &x.StepNo, &x.UptoMessageID, &x.Content, &x.TokensBefore, &x.TokensAfter)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load context summary: %w", err)
	}
	return &x, nil
}

// Save stores x once per (run, step) and returns the stored one (the first
// writer's, when an earlier attempt of the step already saved one).
func (s *Store) Save(ctx context.Context, x Summary) (Summary, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO context_summaries (conversation_id, run_id, step_no, upto_message_id, content, tokens_before, tokens_after)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_id, step_no) DO NOTHING`,
		x.ConversationID, x.RunID, x.StepNo, x.UptoMessageID, x.Content, x.TokensBefore, x.TokensAfter); err != nil {
		return Summary{}, fmt.Errorf("save context summary: %w", err)
	}
	got, err := s.ForStep(ctx, x.RunID, x.StepNo)
	if err != nil || got == nil {
		return x, err
	}
	return *got, nil
}
