package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Tool call statuses (tool_calls.status). A call starts pending (or
// cancelled, when its step was committed while the run was being cancelled)
// and is completed once; an interrupted call becomes success when the user's
// answer is recorded.
const (
	ToolPending     = "pending"
	ToolSuccess     = "success"
	ToolError       = "error"
	ToolInterrupted = "interrupted" // waits for the user (ask_user_question, or a tool approval)
	ToolCancelled   = "cancelled"
)

// ToolCall is a tool_calls row.
type ToolCall struct {
	ID         int64
	RunID      string
	StepNo     int
	MessageID  int64
	Index      int
	ToolCallID string
	Name       string
	Input      string
	Output     *string
	Status     string
	Error      *string
	CreatedAt  time.Time
	FinishedAt *time.Time
}

const toolCols = `id, run_id, step_no, message_id, call_index, tool_call_id, tool_name, tool_input, tool_output, status, error_message, created_at, finished_at`

func scanToolCall(row pgx.Row) (ToolCall, error) {
	var t ToolCall
	err := row.Scan(&t.ID, &t.RunID, &t.StepNo, &t.MessageID, &t.Index, &t.ToolCallID, &t.Name, &t.Input, &t.Output, &t.Status, &t.Error, &t.CreatedAt, &t.FinishedAt)
	return t, err
}

// ErrToolCallNotFound: no such tool call in the run.
var ErrToolCallNotFound = errors.New("tool call not found")

// GetToolCallAndRun loads one tool call of a run together with its run, in
// one statement (what tool-invoke needs before it runs the call).
func (s *Store) GetToolCallAndRun(ctx context.Context, runID, toolCallID string) (ToolCall, Run, error) {
	return s.GetToolCallAndRunWith(ctx, runID, toolCallID, Joined{})
}

// Joined is a read of another package that rides along GetToolCallAndRunWith's
// statement, so that what the call needs next costs no round trip of its own
// (tool-invoke: the MCP layer's manifest entry and server row of the call's
// tool). SQL is a LATERAL subquery that may refer to the call's row as t
// (t.run_id, t.tool_name, …) and must return exactly one row; its columns are
// scanned into Dest, in order. A zero Joined reads nothing more.
type Joined struct {
	SQL  string
	Dest []any
}

// GetToolCallAndRunWith is GetToolCallAndRun with j's columns read in the
// same statement.
func (s *Store) GetToolCallAndRunWith(ctx context.Context, runID, toolCallID string, j Joined) (ToolCall, Run, error) {
	var (
		t       ToolCall
		r       Run
		payload []byte
	)
	dest := append([]any{&t.ID, &t.RunID, &t.StepNo, &t.MessageID, &t.Index, &t.ToolCallID, &t.Name, &t.Input, &t.Output,
		&t.Status, &t.Error, &t.CreatedAt, &t.FinishedAt}, runDest(&r, &payload)...)
	sql := `SELECT ` + prefixed("t", toolCols) + `, ` + prefixed("r", runCols)
	from := ` FROM tool_calls t JOIN agent_runs r ON r.id = t.run_id`
	if j.SQL != "" {
		sql += `, j.*`
		from += ` LEFT JOIN LATERAL (` + j.SQL + `) j ON true`
		dest = append(dest, j.Dest...)
	}
	err := s.pool.QueryRow(ctx, sql+from+` WHERE t.run_id = $1 AND t.tool_call_id = $2`, runID, toolCallID).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, r, ErrToolCallNotFound
	}
	if err != nil {
		return t, r, fmt.Errorf("load tool call %s of run %s: %w", toolCallID, runID, err)
	}
	return t, r, decodePayload(&r, payload)
}

// ToolResult is the outcome of running one tool call.
type ToolResult struct {
	RunID      string
	ThreadID   string
	ToolCallID string
	// StepNo is the step the call belongs to (tool-invoke has it from the
	// call's row). With ThreadID it names the next step's event ahead of the
	// statement; when either is missing CompleteToolCall reads them first.
	StepNo int
	Status string // ToolSuccess, ToolError, ToolInterrupted or ToolCancelled
	Output string
	Error  string
	// InterruptMessage is shown as the run's error_message when the call
	// interrupts the run (e.g. the first question asked).
	InterruptType    string
	InterruptMessage string
	// Stream are events appended to the run's stream once the result is
	// recorded (not for a duplicate), ahead of the closing events when the
	// result ended the run.
	Stream []runstream.OnceEvent
	// StreamAfter, when set, delays appending Stream until it is closed: an
	// append of the caller's, still under way, whose events come first (tool
	// -invoke's tool-started event, sent off its critical path).
	StreamAfter <-chan struct{}
}

// FanIn reports what completing a tool call did.
type FanIn struct {
	Duplicate   bool // the call was already completed: nothing changed
	Remaining   int  // calls of the step still running
	NextStep    int  // > 0 when this completion readied the next step
	Interrupted bool // this completion ended the run as interrupted
	Run         Run  // the run, when this completion ended it
	// streamHandedOff: the result's stream events go with the next step's
	// event (outbox.Row.Before), not appended by CompleteToolCall itself.
	streamHandedOff bool
}

// CompleteToolCall records a tool result. The last call of a step to finish
// readies the next step — or, when a call waits for the user, ends the run
// as interrupted (and closes its stream). Recording an already-finished call
// is a no-op (Duplicate). After the commit, res.Stream is appended; when
// the completion readied the next step, the relay appends it just before it
// publishes step.ready (outbox.Row.Before), so every event of the next step
// follows it and the caller returns without waiting for the append.
//
// The common case — no call of the step waits for the user — is one
// statement, committed on its own (fanInSQL): one round trip. A completion
// that would end a step in which a call waits for the user, and any
// interrupted result, take the general transaction (completeToolCallTx).
//
// The one statement commits without waiting for its WAL flush
// (synchronous_commit off, set for its own transaction only): the flush is
// most of the statement's time on a busy disk (figure 13 of tests/bench). A
// result that has returned is safe against the product's crash model — a
// process dying (SIGKILL of tool-invoke): the server has the commit, every
// reader sees it at once, and its WAL writer flushes it within 3 ×
// wal_writer_delay (600 ms by default). Only a crash of the PostgreSQL server
// itself (or its host) in that window can lose it, and then it loses the
// whole transaction together — the result, the step's counter and its
// step.ready event — never a part: the call is pending again, as after a
// tool-invoke crash before the commit, and the dispatcher's sweep
// (RecoverStuck, redrive_tools) runs it again (at-least-once; the tool call
// id is the idempotency key). Nothing durable can build on a lost result:
// whatever reads it and commits (the next step) commits synchronously, and
// that flush covers the WAL written before it, this commit included. A
// duplicate writes nothing. The general transaction keeps synchronous commit.
func (s *Store) CompleteToolCall(ctx context.Context, res ToolResult) (out FanIn, err error) {
	ctx, span := telemetry.StartStore(ctx, "run.complete_tool_call")
	defer func() { span.End(err) }()
	return s.completeToolCallSpan(ctx, res)
}

// completeToolCallSpan is CompleteToolCall inside its store span.

func (s *Store) completeToolCallSpan(ctx context.Context, res ToolResult) (FanIn, error) {
	out, err := s.completeToolCall(ctx, res)
	if err == nil && !out.Duplicate && !out.streamHandedOff && res.StreamAfter != nil {
		<-res.StreamAfter
	}
	switch {
	case err != nil || out.Duplicate || out.streamHandedOff:
	case out.Interrupted:
		s.closed(ctx, out.Run, res.Stream...)
	default:
		s.appendBestEffort(ctx, Run{ID: res.RunID, ThreadID: res.ThreadID}, res.Stream)
	}
	return out, err
}

// fanInSQL records a result and, when it is the last of its step, readies the
// next step — in one statement. The exactly-once guards:
//
//   - st0 locks the step's row first (every completion does, the general
//     path too, so completions of one step are serialized and lock in one
//     order) and reads its newest version: pending_tools is current. The
//     step is the caller's ($6, read with the call): a call whose row says
//     otherwise is not recorded (tc), so locking by $6 changes nothing else.
//   - sib locks the step's calls and reads their newest versions too (a
//     plain read would see the statement's snapshot, taken before a sibling
//     that finished first committed): whether one waits for the user.
//   - tc records the result only while the call is pending (a duplicate
//     finds it finished) and only when this completion does not end a step
//     in which a call waits for the user: that case changes nothing here
//     (general = true) and goes to the general transaction.
//   - st decrements the counter; r readies the next step when it reached 0
//     and the run is not terminal; o writes step.ready (outbox.InsertCTE).
//
// $1 run, $2 tool call id, $3 status, $4 output, $5 error, $6 step number
// (the caller's, checked against the call's row); the outbox's arguments follow.
const fanInSQL = `
	WITH st0 AS (
		SELECT s.step_no, s.pending_tools FROM agent_run_steps s
		WHERE s.run_id = $1 AND s.step_no = $6
		FOR UPDATE),
	sib AS (
		SELECT count(*) FILTER (WHERE l.status = 'interrupted') AS interrupted FROM (
			SELECT t.status FROM tool_calls t WHERE t.run_id = $1 AND t.step_no = (SELECT step_no FROM st0) FOR UPDATE) l),
	guard AS (
		SELECT st0.step_no, st0.pending_tools = 1 AND sib.interrupted > 0 AS general FROM st0, sib),
	tc AS (
		UPDATE tool_calls t SET status = $3, tool_output = $4, error_message = NULLIF($5, ''), finished_at = clock_timestamp()
		FROM guard
		WHERE t.run_id = $1 AND t.tool_call_id = $2 AND t.status = 'pending' AND t.step_no = $6 AND NOT guard.general
		RETURNING t.step_no),
	st AS (
		UPDATE agent_run_steps s SET pending_tools = s.pending_tools - 1
		FROM tc WHERE s.run_id = $1 AND s.step_no = tc.step_no
		RETURNING s.pending_tools),
	r AS (
		UPDATE agent_runs SET last_progress_at = clock_timestamp(), updated_at = clock_timestamp()
		FROM st WHERE agent_runs.id = $1 AND st.pending_tools = 0 AND agent_runs.status IN ('pending', 'running', 'cancel_requested')
		RETURNING agent_runs.id),
	`

func (s *Store) completeToolCall(ctx context.Context, res ToolResult) (FanIn, error) {
	var out FanIn
	if res.Status == ToolInterrupted {
		return s.completeToolCallTx(ctx, res)
	}
	if res.StepNo == 0 || res.ThreadID == "" {
		err := s.pool.QueryRow(ctx, `SELECT t.step_no, r.conversation_thread_id FROM tool_calls t JOIN agent_runs r ON r.id = t.run_id
			WHERE t.run_id = $1 AND t.tool_call_id = $2`, res.RunID, res.ToolCallID).Scan(&res.StepNo, &res.ThreadID)
		if errors.Is(err, pgx.ErrNoRows) {
			out.Duplicate = true
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("find tool call %s: %w", res.ToolCallID, err)
		}
	}
	next := res.StepNo + 1
	ready, err := s.outbox.Writer.InsertCTE(ctx, outbox.Pending{
		Payload:   events.StepReady{RunID: res.RunID, ThreadID: res.ThreadID, StepNo: next},
		DedupeKey: fmt.Sprintf("step:%s:%d", res.RunID, next),
	}, "o", "r", 7)
	if err != nil {
		return out, err
	}
	var (
		general, recorded, readied bool
		remaining                  *int
		eventID                    *int64
	)
	args := append([]any{res.RunID, res.ToolCallID, res.Status, res.Output, truncate(res.Error, 4000), res.StepNo}, ready.Args...)
	err = s.pool.QueryRow(ctx, fanInSQL+ready.SQL+`
		SELECT coalesce((SELECT general FROM guard), false), EXISTS (SELECT 1 FROM tc), (SELECT pending_tools FROM st),
			EXISTS (SELECT 1 FROM r), (SELECT id FROM o)
		FROM (SELECT set_config('synchronous_commit', 'off', true)) async_commit`, args...).Scan(&general, &recorded, &remaining, &readied, &eventID)
	if err != nil {
		return out, fmt.Errorf("record tool result %s: %w", res.ToolCallID, err)
	}
	switch {
	case general:
		return s.completeToolCallTx(ctx, res)
	case !recorded:
		out.Duplicate = true
		return out, nil
	}
	if remaining != nil {
		out.Remaining = *remaining
	}
	if readied {
		out.NextStep = next
	}
	if row, ok := ready.Row(eventID); ok {
		if len(res.Stream) > 0 {
			// The result's stream events precede the next step's event (and
			// so everything that step streams): the relay appends them just
			// before publishing it, and the caller does not wait for them.
			row.Before = func(ctx context.Context) {
				if res.StreamAfter != nil {
					<-res.StreamAfter
				}
				s.appendBestEffort(ctx, Run{ID: res.RunID, ThreadID: res.ThreadID}, res.Stream)
			}
			out.streamHandedOff = true
		}
		s.outbox.Publish(ctx, []outbox.Row{row})
	}
	return out, nil
}

// completeToolCallTx is the general path: a transaction that records the
// result, decrements the step's counter and, when it reached 0, ends the run
// as interrupted when a call of the step waits for the user, else readies the
// next step. It locks the step's row first, like fanInSQL.
func (s *Store) completeToolCallTx(ctx context.Context, res ToolResult) (FanIn, error) {
	var out FanIn
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM agent_run_steps WHERE run_id = $1
			AND step_no = (SELECT step_no FROM tool_calls WHERE run_id = $1 AND tool_call_id = $2) FOR UPDATE`, res.RunID, res.ToolCallID); err != nil {
			return fmt.Errorf("lock step of tool call %s: %w", res.ToolCallID, err)
		}
		var stepNo int
		err := tx.QueryRow(ctx, `UPDATE tool_calls SET status = $3, tool_output = $4, error_message = NULLIF($5, ''), finished_at = clock_timestamp()
			WHERE run_id = $1 AND tool_call_id = $2 AND status = 'pending' RETURNING step_no`,
			res.RunID, res.ToolCallID, res.Status, res.Output, truncate(res.Error, 4000)).Scan(&stepNo)
		if errors.Is(err, pgx.ErrNoRows) {
			out.Duplicate = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("record tool result %s: %w", res.ToolCallID, err)
		}
		if err := tx.QueryRow(ctx, `UPDATE agent_run_steps SET pending_tools = pending_tools - 1
			WHERE run_id = $1 AND step_no = $2 RETURNING pending_tools`, res.RunID, stepNo).Scan(&out.Remaining); err != nil {
			return fmt.Errorf("count pending tools: %w", err)
		}
		if out.Remaining > 0 {
			return nil
		}
		r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs WHERE id = $1 FOR UPDATE`, res.RunID))
		if err != nil {
			return err
		}
		if IsTerminal(r.Status) {
			return nil
		}
		var firstInterrupt struct {
			kind, msg string
			found     bool
		}
		rows, err := tx.Query(ctx, `SELECT tool_output FROM tool_calls WHERE run_id = $1 AND step_no = $2 AND status = 'interrupted' ORDER BY call_index`, res.RunID, stepNo)
		if err != nil {
			return err
		}
		for rows.Next() {
			var o *string
			if err := rows.Scan(&o); err != nil {
				rows.Close()
				return err
			}
			if !firstInterrupt.found {
				firstInterrupt.found = true
				firstInterrupt.kind, firstInterrupt.msg = interruptInfo(o)
			}
		}
		rows.Close()
		if firstInterrupt.found {
			if res.Status == ToolInterrupted && res.InterruptMessage != "" && firstInterrupt.msg == "" {
				firstInterrupt.msg = res.InterruptMessage
			}
			kind := firstInterrupt.kind
			if kind == "" {
				kind = "ask_user_question_required"
			}
			fr, changed, err := finishTx(ctx, tx, emit, r.ID, Finish{Status: StatusInterrupted, ErrorType: kind, ErrorMessage: firstInterrupt.msg})
			if err != nil {
				return err
			}
			out.Interrupted, out.Run = changed, fr
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_runs SET last_progress_at = clock_timestamp(), updated_at = clock_timestamp() WHERE id = $1`, r.ID); err != nil {
			return err
		}
		out.NextStep = stepNo + 1
		return emit(outbox.Pending{
			Payload:   events.StepReady{RunID: r.ID, ThreadID: r.ThreadID, StepNo: stepNo + 1},
			DedupeKey: fmt.Sprintf("step:%s:%d", r.ID, stepNo+1),
		})
	})
	return out, err
}

// interruptInfo reads the interrupt kind and first question from an
// interrupted call's stored output ({"interrupt": kind, "questions":[{"question":…}]}).
func interruptInfo(output *string) (kind, msg string) {
	if output == nil {
		return "", ""
	}
	var doc struct {
		Interrupt string `json:"interrupt"`
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
		Approval struct {
			ActionRequests []struct {
				Name string `json:"name"`
			} `json:"action_requests"`
		} `json:"approval"`
	}
	if json.Unmarshal([]byte(*output), &doc) != nil {
		return "", ""
	}
	if len(doc.Questions) > 0 {
		msg = doc.Questions[0].Question
	}
	if a := doc.Approval.ActionRequests; msg == "" && len(a) > 0 {
		msg = approval.Message(a[0].Name)
	}
	return doc.Interrupt, msg
}

// InterruptedCalls returns the calls of run id still waiting for the user.
func (s *Store) InterruptedCalls(ctx context.Context, runID string) ([]ToolCall, error) {
	return s.InterruptedCallsTx(ctx, s.pool, runID)
}

// InterruptedCallsTx is InterruptedCalls through tx.
func (s *Store) InterruptedCallsTx(ctx context.Context, tx postgres.DB, runID string) ([]ToolCall, error) {
	return queryToolCalls(ctx, tx, `SELECT `+toolCols+` FROM tool_calls WHERE run_id = $1 AND status = 'interrupted' ORDER BY step_no, call_index`, runID)
}

func queryToolCalls(ctx context.Context, db postgres.DB, sql string, args ...any) ([]ToolCall, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ToolCall
	for rows.Next() {
		t, err := scanToolCall(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// AnswerInterruptedTx records, inside the caller's transaction tx, the
// user's answer as the result of every call of run id that waits for the
// user: {"questions": …, "answer": answer}.
func (s *Store) AnswerInterruptedTx(ctx context.Context, tx pgx.Tx, runID string, answer json.RawMessage) (int, error) {
	calls, err := s.InterruptedCallsTx(ctx, tx, runID)
	if err != nil {
		return 0, err
	}
	for _, c := range calls {
		if err := answerQuestionTx(ctx, tx, c, answer); err != nil {
			return 0, err
		}
	}
	return len(calls), nil
}

// jsonNoEscape encodes v without HTML escaping: the model reads the user's
// answer as typed (same rule as tool.JSON).
func jsonNoEscape(v any) (string, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// pendingToolCalls returns the calls of a run step that have not finished.
func pendingToolCalls(ctx context.Context, db postgres.DB, runID string, stepNo int) ([]ToolCall, error) {
	return queryToolCalls(ctx, db, `SELECT `+toolCols+` FROM tool_calls WHERE run_id = $1 AND step_no = $2 AND status = 'pending' ORDER BY call_index`, runID, stepNo)
}

// ToolStat counts one tool's calls in a run.
type ToolStat struct {
	Name        string `json:"name"`
	CallCount   int    `json:"call_count"`
	ErrorCount  int    `json:"error_count"`
	Interrupted int    `json:"-"`
}

// ToolStats counts run id's tool calls per tool (name order): the
// trajectory an evaluation reads, kept in PostgreSQL after the run's event
// stream has expired.
func (s *Store) ToolStats(ctx context.Context, runID string) ([]ToolStat, error) {
	rows, err := s.pool.Query(ctx, `SELECT tool_name, count(*), count(*) FILTER (WHERE status = 'error'),
		count(*) FILTER (WHERE status = 'interrupted')
		FROM tool_calls WHERE run_id = $1 GROUP BY tool_name ORDER BY tool_name`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []ToolStat{}
	for rows.Next() {
		var t ToolStat
		if err := rows.Scan(&t.Name, &t.CallCount, &t.ErrorCount, &t.Interrupted); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
