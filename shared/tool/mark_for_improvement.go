package tool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MarkForImprovement is the builtin mark_for_improvement tool: it records a
// lead for later review, once per (run, tool call): a replay of the same call
// returns the same id, a replay with another reason is a conflict.
type MarkForImprovement struct {
	Pool *pgxpool.Pool
}

// Spec implements Tool.
func (MarkForImprovement) Spec() Spec {
	return Spec{
		Name: "mark_for_improvement", DisplayName: "Mark for improvement", Category: "builtin", Tags: []string{"feedback"}, Base: true,
		Description: "Record an improvement lead: when the user corrects you, is repeatedly unsatisfied, a tool fails, or a capability needed for the task is missing; also when you found a reusable, well-founded method. State the actual problem or lesson, the steps or errors involved, what was tried and the result; separate facts from guesses; no credentials or unrelated user content. Do not record the same issue twice. Continue the original task afterwards.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["reason"],
			"properties":{"reason":{"type":"string","minLength":1,"maxLength":4000,"description":"What happened and why it should be improved (1-4000 characters)."}}}`),
	}
}

// Invoke implements Tool.
func (m MarkForImprovement) Invoke(ctx context.Context, c Call) (Result, error) {
	if c.RunID == "" || c.ToolCallID == "" {
		return Errorf("mark_for_improvement needs a real run and tool call id; nothing was saved"), nil
	}
	var args struct {
		Reason *string `json:"reason"`
	}
	if err := strictDecode([]byte(c.Arguments), &args); err != nil || args.Reason == nil {
		return Errorf("arguments must be {\"reason\": string}; nothing was saved"), nil
	}
	reason := strings.TrimSpace(*args.Reason)
	if n := utf8.RuneCountInString(reason); n < 1 || n > 4000 {
		return Errorf(fmt.Sprintf("reason must be 1 to 4000 characters after trimming, got %d; nothing was saved", n)), nil
	}
	var id, storedReason string
	err := pgx.BeginFunc(ctx, m.Pool, func(tx pgx.Tx) error {
		// Re-check at the point of effect: the run is live, belongs to this
		// user and agent, the call is one of its calls, and the user exists.
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (
			SELECT 1 FROM agent_runs r JOIN users u ON u.uid = r.uid AND NOT u.is_deleted
			JOIN tool_calls tc ON tc.run_id = r.id AND tc.tool_call_id = $2
			WHERE r.id = $1 AND r.uid = $3 AND r.agent_slug = $4 AND r.status IN ('pending', 'running', 'cancel_requested'))`,
			c.RunID, c.ToolCallID, c.UID, c.AgentSlug).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return errRefused
		}
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		if _, err := tx.Exec(ctx, `INSERT INTO improvement_marks (id, run_id, tool_call_id, uid, agent_slug, thread_id, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_id, tool_call_id) DO NOTHING`,
			"imp_"+hex.EncodeToString(b), c.RunID, c.ToolCallID, c.UID, c.AgentSlug, c.ThreadID, reason); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id, reason FROM improvement_marks WHERE run_id = $1 AND tool_call_id = $2`,
			c.RunID, c.ToolCallID).Scan(&id, &storedReason)
	})
	if errors.Is(err, errRefused) {
		return Errorf("this run can no longer record improvement marks; nothing was saved"), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("save improvement mark: %w", err)
	}
	if storedReason != reason {
		return Errorf("this tool call already saved a different reason (" + id + "); nothing was changed"), nil
	}
	out, _ := JSON(map[string]any{"id": id, "run_id": c.RunID, "saved": true})
	return Result{Output: out}, nil
}

var errRefused = errors.New("refused")
