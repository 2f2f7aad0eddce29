package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
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
	// GuardBlocked: the content guard refused the turn's output. Content is
	// then the refusal text that replaces the answer, ToolCalls are empty,
	// and the run ends failed with error_type content_guard_blocked (its
	// output message is the refusal).
	GuardBlocked bool
	// UsedToolCallIDs are tool call ids the run already has (agent-step
	// passes those of its claim's transcript), so that the common case needs
	// no read of them; an id missing here costs the general path, not a
	// duplicate.
	UsedToolCallIDs []string
	// Steers are user messages the model saw ahead of its answer that are
	// not in the transcript yet (steers of a sub-agent's parent thread,
	// with their text as shown): stored before the assistant message, in
	// order, by the same transaction — so each is shown once, in its place.
	Steers []Steer
}

// Step outcomes.
const (
	OutcomeTools     = "tools"                 // tool calls fanned out; the last one to finish readies the next step
	OutcomeCompleted = "completed"             // the model answered without tool calls: the run completed
	OutcomeCancelled = "cancelled"             // the run was cancelled: it ended at this boundary
	OutcomeBlocked   = "content_guard_blocked" // the content guard refused the output: the run failed
)

// StepResult reports what a committed step did.
type StepResult struct {
	Outcome   string
	MessageID int64
	Run       Run
	ToolCalls []NewToolCall
}

// CommitStep writes the step record, the assistant message, its tool calls
// and the resulting events in one transaction. Tool calls get run-unique ids
// first (a provider's id that is missing, too long or already used in the
// run is replaced); StepResult.ToolCalls are the calls as written.
// ErrDuplicateStep when the step was already committed; ErrLeaseLost when the
// caller's attempt no longer owns the run.
//
// The common case — the caller still holds the lease of a running run, and
// the ids in c.UsedToolCallIDs are all the run has — is one round trip
// (commitStepOnce). Anything else (a duplicate, a lost lease, a cancel
// requested meanwhile, an id the caller did not know) changes nothing there
// and takes two (commitStepTwice), which tells those cases apart.
func (s *Store) CommitStep(ctx context.Context, c StepCommit) (res StepResult, err error) {
	ctx, span := telemetry.StartStore(ctx, "run.commit_step")
	defer func() { span.End(err) }()
	return s.commitStep(ctx, c)
}

// commitStep is CommitStep inside its store span.

func (s *Store) commitStep(ctx context.Context, c StepCommit) (StepResult, error) {
	res, done, err := s.commitStepOnce(ctx, c)
	if done || err != nil {
		return res, err
	}
	return s.commitStepTwice(ctx, c)
}

// stepGuardSQL is commitStepOnce's exactly-once guard, run once the run's
// row is locked (a statement of its own, so that it reads the newest
// version): it fails the transaction — an error the caller recognises by
// stepGuardMark — unless the caller's attempt holds the lease of a running
// run whose step count is below the step's.
const (
	stepGuardMark = "commit_step_guard"
	stepGuardSQL  = `SELECT CASE WHEN status = 'running' AND step_count < $2 AND worker_id = $3 AND attempt_count = $4 THEN 0
		ELSE ('` + stepGuardMark + `:' || status)::int END FROM agent_runs WHERE id = $1`
)

// commitStepOnce commits the step in one pipelined round trip: BEGIN, lock
// the run, the guard, the writes (assuming a running run), COMMIT. done is
// false, with nothing written, when the guard refused or a tool call id was
// already used; the caller then takes the general path.
func (s *Store) commitStepOnce(ctx context.Context, c StepCommit) (res StepResult, done bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return res, false, err
	}
	defer conn.Release()
	c.ToolCalls = uniqueToolCallIDs(c.StepNo, c.ToolCalls, c.UsedToolCallIDs)
	var rows []outbox.Row
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE`, c.Run.ID)
	b.Queue(stepGuardSQL, c.Run.ID, c.StepNo, c.Owner.Worker, c.Owner.Attempt)
	queueSteers(b, c)
	if err := s.queueStepWrites(ctx, b, c, StatusRunning, nil, nil, &res, &rows); err != nil {
		return StepResult{}, false, err
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // a broken connection is discarded
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "22P02" && strings.Contains(pgErr.Message, stepGuardMark) ||
			pgErr.Code == "23505" && pgErr.ConstraintName == "tool_calls_run_id_tool_call_id_key") {
			return StepResult{}, false, nil
		}
		return StepResult{}, false, fmt.Errorf("commit step %d of run %s: %w", c.StepNo, c.Run.ID, err)
	}
	s.outbox.Publish(ctx, rows)
	return res, true, nil
}

// commitStepTwice is the general path, in two round trips: the first batch
// opens the transaction, locks the run as its lease holder (the exactly-once
// guard), reserves the message ids and reads the run's tool call ids; the
// second writes everything else — the step record among it — and commits.
func (s *Store) commitStepTwice(ctx context.Context, c StepCommit) (StepResult, error) {
	var res StepResult
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return res, err
	}
	defer conn.Release()
	rollback := func(cause error) (StepResult, error) {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // a broken connection is discarded
		}
		return StepResult{}, cause
	}

	// The run row, locked as the current lease holder at the previous step,
	// is the guard: a second commit of the step (a retry, or a stale attempt)
	// finds step_count moved on or the lease gone. The step record's primary
	// key backs it up.
	var (
		owned     bool
		status    string
		stepCount int
		msgID     int64
		seq       int64
	)
	b1 := &pgx.Batch{}
	b1.Queue("BEGIN")
	b1.Queue(`SELECT status, step_count, coalesce(worker_id = $2 AND attempt_count = $3 AND status IN ('running', 'cancel_requested'), false)
		FROM agent_runs WHERE id = $1 FOR UPDATE`, c.Run.ID, c.Owner.Worker, c.Owner.Attempt).QueryRow(func(row pgx.Row) error {
		return row.Scan(&status, &stepCount, &owned)
	})
	queueSteers(b1, c) // rolled back with the rest when the guard refuses
	b1.Queue(`SELECT nextval(pg_get_serial_sequence('messages', 'id')), nextval('transcript_seq')`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&msgID, &seq)
	})
	var used []string
	if len(c.ToolCalls) > 0 {
		b1.Queue(`SELECT coalesce(array_agg(tool_call_id), '{}') FROM tool_calls WHERE run_id = $1`, c.Run.ID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&used)
		})
	}
	if err := conn.SendBatch(ctx, b1).Close(); err != nil {
		return rollback(fmt.Errorf("lock run for step: %w", err))
	}
	if stepCount >= c.StepNo {
		return rollback(ErrDuplicateStep)
	}
	if !owned {
		return rollback(ErrLeaseLost)
	}
	c.ToolCalls = uniqueToolCallIDs(c.StepNo, c.ToolCalls, used)
	var rows []outbox.Row
	b2 := &pgx.Batch{}
	if err := s.queueStepWrites(ctx, b2, c, status, &msgID, &seq, &res, &rows); err != nil {
		return rollback(err)
	}
	b2.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b2).Close(); err != nil {
		return rollback(fmt.Errorf("commit step %d of run %s: %w", c.StepNo, c.Run.ID, err))
	}
	s.outbox.Publish(ctx, rows)
	return res, nil
}

// queueSteers stores c.Steers in the run's transcript; they take their
// transcript positions before the assistant message's.
func queueSteers(b *pgx.Batch, c StepCommit) {
	for _, st := range c.Steers {
		meta, _ := json.Marshal(map[string]any{"steer_request_id": st.RequestID, "step_no": c.StepNo})
		b.Queue(`INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, run_id, request_id, delivery_status, transcript_seq)
			VALUES ($1, 'user', $2, 'text', $3, $4, $5, 'dispatched', nextval('transcript_seq'))`,
			c.Run.ConversationID, st.Content, meta, c.Run.ID, c.Run.RequestID)
	}
}

// queueStepWrites queues the step's writes on b for a run in status: the
// assistant message, its tool calls, the run's and attempt's updates (or the
// run's end), the events and the step record. msgID and seq are the
// message's reserved id and transcript position; nil takes them from the
// sequences in the message's insert, and the later statements refer to its
// id as the session's currval.
func (s *Store) queueStepWrites(ctx context.Context, b *pgx.Batch, c StepCommit, status string, msgID, seq *int64, res *StepResult, rows *[]outbox.Row) error {
	const thisMessage = `coalesce($%d::bigint, currval(pg_get_serial_sequence('messages', 'id')))`
	meta := map[string]any{"step_no": c.StepNo, "attempt": c.Owner.Attempt, "stream_message_id": c.StreamMessageID, "model_spec": c.ModelSpec}
	if c.Reasoning != "" {
		meta["reasoning_content"] = c.Reasoning
	}
	if c.Partial {
		meta["partial"] = true
	}
	if c.GuardBlocked {
		meta["content_guard_blocked"] = true
	}
	if len(c.StepUsage) > 0 {
		meta["usage"] = json.RawMessage(c.StepUsage)
	}
	metaJSON, _ := json.Marshal(meta)
	msgType := "text"
	if len(c.ToolCalls) > 0 {
		msgType = "tool_call"
	}
	b.Queue(`INSERT INTO messages (id, conversation_id, role, content, message_type, extra_metadata, run_id, request_id, transcript_seq)
		VALUES (coalesce($1::bigint, nextval(pg_get_serial_sequence('messages', 'id'))), $2, 'assistant', $3, $4, $5, $6, $7,
			coalesce($8::bigint, nextval('transcript_seq')))
		RETURNING id`,
		msgID, c.Run.ConversationID, c.Content, msgType, metaJSON, c.Run.ID, c.Run.RequestID, seq).QueryRow(func(row pgx.Row) error {
		return row.Scan(&res.MessageID)
	})
	toolStatus := ToolPending
	if status == StatusCancelRequested {
		toolStatus = ToolCancelled
	}
	for i, tc := range c.ToolCalls {
		b.Queue(`INSERT INTO tool_calls (run_id, step_no, message_id, call_index, tool_call_id, tool_name, tool_input, status)
			VALUES ($1, $2, `+fmt.Sprintf(thisMessage, 3)+`, $4, $5, $6, $7, $8)`, c.Run.ID, c.StepNo, msgID, i, tc.ID, tc.Name, tc.Arguments, toolStatus)
	}
	res.ToolCalls = c.ToolCalls
	step := c.StepNo
	scanInto := func(row pgx.Row) error {
		r, err := scanRun(row)
		res.Run = r
		return err
	}
	switch {
	case status == StatusCancelRequested || len(c.ToolCalls) == 0:
		f := Finish{Status: StatusCompleted, OutputMessageID: msgID, StepCount: &step, TokenUsage: c.TokenUsage, Owner: &c.Owner}
		res.Outcome = OutcomeCompleted
		if status == StatusCancelRequested {
			f.Status, f.ErrorType, f.ErrorMessage = StatusCancelled, "cancelled", "the run was cancelled"
			res.Outcome = OutcomeCancelled
		} else if c.GuardBlocked {
			f.Status, f.ErrorType, f.ErrorMessage = StatusFailed, "content_guard_blocked", c.Content
			res.Outcome = OutcomeBlocked
		}
		args, err := finishArgs(c.Run.ID, f)
		if err != nil {
			return err
		}
		b.Queue(finishStepSQL, args...).QueryRow(scanInto)
		final := c.Run
		final.Status = f.Status
		if err := s.outbox.Writer.QueueWrite(ctx, b, rows, finishedEvent(final)); err != nil {
			return err
		}
	default:
		res.Outcome = OutcomeTools
		b.Queue(`UPDATE agent_runs SET step_count = $2, token_usage = coalesce($3, token_usage),
			worker_id = NULL, lease_expires_at = NULL, last_progress_at = clock_timestamp(), updated_at = clock_timestamp()
			WHERE id = $1 RETURNING `+runCols, c.Run.ID, step, nullJSON(c.TokenUsage)).QueryRow(scanInto)
		b.Queue(`UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = 'step_committed'
			WHERE run_id = $1 AND attempt_no = $2`, c.Run.ID, c.Owner.Attempt)
		pending := make([]outbox.Pending, 0, len(c.ToolCalls))
		for _, tc := range c.ToolCalls {
			pending = append(pending, outbox.Pending{
				Payload:   events.ToolCallRequested{RunID: c.Run.ID, ThreadID: c.Run.ThreadID, StepNo: step, ToolCallID: tc.ID},
				DedupeKey: "tool:" + c.Run.ID + ":" + tc.ID,
			})
		}
		if err := s.outbox.Writer.QueueWrite(ctx, b, rows, pending...); err != nil {
			return err
		}
	}
	b.Queue(`INSERT INTO agent_run_steps (run_id, step_no, attempt_no, assistant_message_id, tool_call_count, pending_tools, outcome, usage, started_at)
		VALUES ($1, $2, $3, `+fmt.Sprintf(thisMessage, 4)+`, $5, $6, $7, $8, $9)`, c.Run.ID, c.StepNo, c.Owner.Attempt, msgID, len(c.ToolCalls),
		pendingCount(res.Outcome, len(c.ToolCalls)), res.Outcome, nullJSON(c.StepUsage), c.StartedAt)
	return nil
}

// uniqueToolCallIDs gives every call a run-unique id: providers may repeat
// ids across turns or send none; the id is only a correlation key, so
// renaming is safe. used are the ids the run already has.
func uniqueToolCallIDs(stepNo int, calls []NewToolCall, used []string) []NewToolCall {
	if len(calls) == 0 {
		return calls
	}
	seen := make(map[string]bool, len(used)+len(calls))
	for _, id := range used {
		seen[id] = true
	}
	out := make([]NewToolCall, 0, len(calls))
	for i, c := range calls {
		if c.ID == "" || seen[c.ID] || len(c.ID) > 200 {
			b := make([]byte, 4)
			_, _ = rand.Read(b)
			c.ID = fmt.Sprintf("call_%d_%d_%s", stepNo, i, hex.EncodeToString(b))
		}
		seen[c.ID] = true
		out = append(out, c)
	}
	return out
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
	// CacheReadTokens were served from the provider's prompt cache;
	// CacheReported says the provider reported that figure at all.
	CacheReadTokens int64
	CacheReported   bool
}

// InputTokenDetails is the cache detail of a usage bucket.
type InputTokenDetails struct {
	CacheRead int64 `json:"cache_read"`
}

// UsageTotals are one bucket's sums. The cache hit rate is
// sum(cache_read) ÷ the input tokens of the calls that reported a cache
// figure (calls without one are not counted as misses), as the original.
type UsageTotals struct {
	InputTokens             int64              `json:"input_tokens"`
	OutputTokens            int64              `json:"output_tokens"`
	TotalTokens             int64              `json:"total_tokens"`
	InputTokenDetails       *InputTokenDetails `json:"input_token_details,omitempty"`
	CacheReportedInputToken int64              `json:"cache_reported_input_tokens,omitempty"`
	CacheHitRate            *float64           `json:"cache_hit_rate,omitempty"`
}

func (t *UsageTotals) add(u UsageTotals) {
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
	t.TotalTokens += u.TotalTokens
	if u.InputTokenDetails != nil {
		if t.InputTokenDetails == nil {
			t.InputTokenDetails = &InputTokenDetails{}
		}
		t.InputTokenDetails.CacheRead += u.InputTokenDetails.CacheRead
		t.CacheReportedInputToken += u.CacheReportedInputToken
	}
	t.CacheHitRate = nil
	if t.InputTokenDetails != nil && t.CacheReportedInputToken > 0 {
		r := float64(t.InputTokenDetails.CacheRead) / float64(t.CacheReportedInputToken)
		t.CacheHitRate = &r
	}
}

// ModelUsage is one model spec's bucket.
type ModelUsage struct {
	UsageTotals
	CallCount int `json:"call_count"`
}

// TokenUsage is agent_runs.token_usage (schema_version 2, as the original):
// per model spec ("provider:model") and in total, with cache-read tokens.
type TokenUsage struct {
	SchemaVersion             int                   `json:"schema_version"`
	ModelCallCount            int                   `json:"model_call_count"`
	UsageReportedCallCount    int                   `json:"usage_reported_call_count"`
	UsageUnavailableCallCount int                   `json:"usage_unavailable_call_count"`
	Complete                  bool                  `json:"complete"`
	Models                    map[string]ModelUsage `json:"models"`
	Total                     UsageTotals           `json:"total"`
}

func parseUsage(doc json.RawMessage) TokenUsage {
	t := TokenUsage{SchemaVersion: 2, Models: map[string]ModelUsage{}, Complete: true}
	if len(doc) > 0 && string(doc) != "null" {
		_ = json.Unmarshal(doc, &t)
		if t.Models == nil {
			t.Models = map[string]ModelUsage{}
		}
		t.SchemaVersion = 2
	}
	return t
}

// AddUsage folds one model call into the run's cumulative usage document.
func AddUsage(prev json.RawMessage, spec string, u Usage) json.RawMessage {
	t := parseUsage(prev)
	t.ModelCallCount++
	if u.Reported {
		t.UsageReportedCallCount++
		one := UsageTotals{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
		if u.CacheReported {
			one.InputTokenDetails = &InputTokenDetails{CacheRead: u.CacheReadTokens}
			one.CacheReportedInputToken = u.InputTokens
		}
		m := t.Models[spec]
		m.add(one)
		m.CallCount++
		t.Models[spec] = m
		t.Total.add(one)
	} else {
		t.UsageUnavailableCallCount++
	}
	t.Complete = t.UsageUnavailableCallCount == 0
	b, _ := json.Marshal(t)
	return b
}

// MergeUsage sums several runs' usage documents (a thread's total); nil
// documents (runs without a model call) are skipped.
func MergeUsage(docs ...json.RawMessage) json.RawMessage {
	t := parseUsage(nil)
	for _, d := range docs {
		if len(d) == 0 || string(d) == "null" {
			continue
		}
		o := parseUsage(d)
		t.ModelCallCount += o.ModelCallCount
		t.UsageReportedCallCount += o.UsageReportedCallCount
		t.UsageUnavailableCallCount += o.UsageUnavailableCallCount
		for spec, mu := range o.Models {
			m := t.Models[spec]
			m.add(mu.UsageTotals)
			m.CallCount += mu.CallCount
			t.Models[spec] = m
		}
		t.Total.add(o.Total)
	}
	t.Complete = t.UsageUnavailableCallCount == 0
	b, _ := json.Marshal(t)
	return b
}
