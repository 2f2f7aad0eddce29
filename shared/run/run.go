// Package run is the durable agent run: its state machine (pending → running
// → cancel_requested → completed | failed | cancelled | interrupted), the
// per-step lease a worker claims before a model turn, the write-once step
// records, tool call rows (fan-out / fan-in), the thread transcript the model
// sees, terminal transitions, and the queries the recovery sweep needs.
//
// Every state change and the events it causes are committed together through
// the outbox. Model and tool calls are at-least-once; a step record is written
// exactly once per (run, step): a redelivered or raced step is a no-op.
//
// run is the only writer of agent_runs (and of agent_run_steps,
// agent_run_attempts, tool_calls) and of a run's closing stream events
// (interrupt, error, end; see stream.go). Runs are created by the queue, in
// the queue's transaction, through Store.CreateTx or — pipelined with intake's
// other statements — Store.QueueCreate. run never calls the queue: the
// dependency is queue → run, one way.
//
// Imported by: shared/queue, shared/bootstrap, functions (agent-step,
// tool-invoke, dispatcher, intake), infra/local, tests. May import: events,
// shared/outbox, shared/postgres, shared/failure, shared/agent,
// shared/approval, shared/runstream, shared/telemetry, pgx.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Statuses.
const (
	StatusPending         = "pending"
	StatusRunning         = "running"
	StatusCancelRequested = "cancel_requested"
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusCancelled       = "cancelled"
	StatusInterrupted     = "interrupted"
)

// Run types.
const (
	TypeChat   = "chat"
	TypeResume = "resume"
)

// IsTerminal reports whether status is final.
func IsTerminal(status string) bool {
	switch status {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusInterrupted:
		return true
	}
	return false
}

// ErrNotFound is returned for unknown runs and for runs of other users.
var ErrNotFound = failure.NotFound("run_not_found", "run not found")

// Payload is input_payload: what the run was submitted with, frozen at intake.
type Payload struct {
	ModelSpec        string          `json:"model_spec"`
	ToolApprovalMode string          `json:"tool_approval_mode"`
	Context          agent.Resolved  `json:"context"`
	Resume           json.RawMessage `json:"resume,omitempty"`
}

// Run is an agent_runs row.
type Run struct {
	ID              string
	ThreadID        string
	ConversationID  int64
	RuntimeScopeID  string
	AgentSlug       string
	UID             string
	Status          string
	RequestID       string
	Source          string
	Channel         string
	CreatedByRunID  *string
	RunType         string
	InputMessageID  *int64
	OutputMessageID *int64
	Payload         Payload
	TokenUsage      json.RawMessage
	ErrorType       *string
	ErrorMessage    *string
	WorkerID        *string
	AttemptCount    int
	LeaseExpiresAt  *time.Time
	RecoveryCount   int
	StepCount       int
	LastProgressAt  time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const runCols = `id, conversation_thread_id, conversation_id, runtime_scope_id, agent_slug, uid, status, request_id,
	source, channel, created_by_run_id, run_type, input_message_id, output_message_id, input_payload, token_usage,
	error_type, error_message, worker_id, attempt_count, lease_expires_at, recovery_count, step_count,
	last_progress_at, started_at, finished_at, created_at, updated_at`

func scanRun(row pgx.Row) (Run, error) { return scanRunWith(row) }

// prefixed qualifies each column of cols with table.
func prefixed(table, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = table + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// scanRunWith scans a run followed by extra columns.
func scanRunWith(row pgx.Row, extra ...any) (Run, error) {
	var r Run
	var payload []byte
	if err := row.Scan(append(runDest(&r, &payload), extra...)...); err != nil {
		return r, err
	}
	return r, decodePayload(&r, payload)
}

// runDest are the scan destinations of runCols.
func runDest(r *Run, payload *[]byte) []any {
	return []any{&r.ID, &r.ThreadID, &r.ConversationID, &r.RuntimeScopeID, &r.AgentSlug, &r.UID, &r.Status, &r.RequestID,
		&r.Source, &r.Channel, &r.CreatedByRunID, &r.RunType, &r.InputMessageID, &r.OutputMessageID, payload, &r.TokenUsage,
		&r.ErrorType, &r.ErrorMessage, &r.WorkerID, &r.AttemptCount, &r.LeaseExpiresAt, &r.RecoveryCount, &r.StepCount,
		&r.LastProgressAt, &r.StartedAt, &r.FinishedAt, &r.CreatedAt, &r.UpdatedAt}
}

func decodePayload(r *Run, payload []byte) error {
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &r.Payload); err != nil {
			return fmt.Errorf("decode input_payload of run %s: %w", r.ID, err)
		}
	}
	return nil
}

// Store is the run repository: the only writer of agent_runs and of a run's
// closing stream events (see stream.go).
type Store struct {
	pool   *pgxpool.Pool
	outbox *outbox.Outbox
	stream StreamAppender
	log    *slog.Logger
}

// NewStore returns a store whose transactions publish through ob and which
// writes runs' closing events to stream. A nil stream writes none (tests of
// the database alone); log may be nil.
func NewStore(pool *pgxpool.Pool, ob *outbox.Outbox, stream StreamAppender, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, outbox: ob, stream: stream, log: log}
}

// Outbox returns the store's outbox.
func (s *Store) Outbox() *outbox.Outbox { return s.outbox }

// Get loads a run by id.
func (s *Store) Get(ctx context.Context, id string) (Run, error) { return s.GetTx(ctx, s.pool, id) }

// GetTx loads a run by id through tx (a transaction, or the pool).
func (s *Store) GetTx(ctx context.Context, tx postgres.DB, id string) (Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("load run %s: %w", id, err)
	}
	return r, nil
}

// ByRequestTx reads uid's run of a request id through tx (request ids are
// per user); ErrNotFound when none exists.
func (s *Store) ByRequestTx(ctx context.Context, tx postgres.DB, uid, requestID string) (Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs WHERE uid = $1 AND request_id = $2`, uid, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("load run of request %s: %w", requestID, err)
	}
	return r, nil
}

// GetForUser loads a run owned by uid; another user's run is ErrNotFound.
func (s *Store) GetForUser(ctx context.Context, uid, id string) (Run, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if r.UID != uid {
		return Run{}, ErrNotFound
	}
	return r, nil
}

// Output returns the content of r's final assistant message (its
// output_message_id), or "" while it has none.
func (s *Store) Output(ctx context.Context, r Run) (string, error) {
	if r.OutputMessageID == nil {
		return "", nil
	}
	var out string
	err := s.pool.QueryRow(ctx, `SELECT content FROM messages WHERE id = $1 AND run_id = $2 AND role = 'assistant'`,
		*r.OutputMessageID, r.ID).Scan(&out)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return out, err
}

// LatestForThread returns the newest chat or resume run of (uid, agent, thread), if any.
func (s *Store) LatestForThread(ctx context.Context, uid, agentSlug, threadID string) (*Run, error) {
	return s.LatestForThreadTx(ctx, s.pool, uid, agentSlug, threadID)
}

// LatestForThreadTx is LatestForThread through tx.
func (s *Store) LatestForThreadTx(ctx context.Context, tx postgres.DB, uid, agentSlug, threadID string) (*Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND run_type IN ('chat', 'resume')
		ORDER BY created_at DESC, id DESC LIMIT 1`, uid, agentSlug, threadID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// ThreadUsage is a thread's token usage as the state shows it: the latest
// model call (the newest step's usage), the run (the latest run's
// cumulative document) and the thread (every run of the thread summed;
// sub-agent runs keep their own threads and are not merged), each in the
// schema_version 2 form. Nil parts: no model call yet.
type ThreadUsage struct {
	Latest json.RawMessage `json:"latest"`
	Run    json.RawMessage `json:"run"`
	Thread json.RawMessage `json:"thread"`
}

// UsageForThread returns uid's thread usage; latest is the thread's latest run (nil: none).
func (s *Store) UsageForThread(ctx context.Context, uid, threadID string, latest *Run) (ThreadUsage, error) {
	out := ThreadUsage{Latest: json.RawMessage("null"), Run: json.RawMessage("null"), Thread: json.RawMessage("null")}
	rows, err := s.pool.Query(ctx, `SELECT token_usage FROM agent_runs
		WHERE uid = $1 AND conversation_thread_id = $2 AND token_usage IS NOT NULL`, uid, threadID)
	if err != nil {
		return out, err
	}
	var docs []json.RawMessage
	for rows.Next() {
		var d []byte
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return out, err
		}
		docs = append(docs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, err
	}
	if len(docs) > 0 {
		out.Thread = MergeUsage(docs...)
	}
	if latest == nil || len(latest.TokenUsage) == 0 {
		return out, nil
	}
	out.Run = latest.TokenUsage
	var step []byte
	err = s.pool.QueryRow(ctx, `SELECT usage FROM agent_run_steps WHERE run_id = $1 AND usage IS NOT NULL
		ORDER BY step_no DESC, attempt_no DESC LIMIT 1`, latest.ID).Scan(&step)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return out, err
	}
	if len(step) > 0 {
		out.Latest = step
	}
	return out, nil
}

// ActiveForThreadTx returns the non-terminal run of (uid, agent, thread), if
// any, through tx.
func (s *Store) ActiveForThreadTx(ctx context.Context, tx postgres.DB, uid, agentSlug, threadID string) (*Run, error) {
	r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3
		  AND status IN ('pending', 'running', 'cancel_requested')`, uid, agentSlug, threadID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// ThreadRuns is what a queue needs to know of a thread's runs.
type ThreadRuns struct {
	Active *Run // the non-terminal run, if any
	Latest *Run // the newest chat or resume run, if any
}

// ThreadRunsTx reads the active and the latest run of (uid, agent, thread) in
// one statement, through tx.
func (s *Store) ThreadRunsTx(ctx context.Context, tx postgres.DB, uid, agentSlug, threadID string) (ThreadRuns, error) {
	rows, err := tx.Query(ctx, `
		(SELECT true, `+runCols+` FROM agent_runs WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3
			AND status IN ('pending', 'running', 'cancel_requested'))
		UNION ALL
		(SELECT false, `+runCols+` FROM agent_runs WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3
			AND run_type IN ('chat', 'resume') ORDER BY created_at DESC, id DESC LIMIT 1)`, uid, agentSlug, threadID)
	if err != nil {
		return ThreadRuns{}, err
	}
	defer rows.Close()
	var out ThreadRuns
	for rows.Next() {
		var active bool
		var r Run
		var payload []byte
		if err := rows.Scan(append([]any{&active}, runDest(&r, &payload)...)...); err != nil {
			return ThreadRuns{}, err
		}
		if err := decodePayload(&r, payload); err != nil {
			return ThreadRuns{}, err
		}
		if active {
			out.Active = &r
		} else {
			out.Latest = &r
		}
	}
	return out, rows.Err()
}

// NewRun describes a run to create.
type NewRun struct {
	ID             string
	ThreadID       string
	ConversationID int64
	AgentSlug      string
	UID            string
	RequestID      string
	Source         string
	Channel        string
	RunType        string
	CreatedByRunID *string
	InputMessageID int64 // 0: the newest user message of RequestID (see QueueCreate)
	Payload        Payload
}

// ErrThreadBusy: the thread already has a non-terminal run (the database's
// one-active-run-per-thread index refused a second).
var ErrThreadBusy = failure.Conflict("run_busy", "the thread already has an active run")

// insertRunSQL inserts a pending run. $11 is the input message; when it is
// NULL the run's input is the newest user message of the request ($6) in the
// conversation ($3) — written earlier in the same transaction by intake.
const insertRunSQL = `
	INSERT INTO agent_runs (id, conversation_thread_id, conversation_id, runtime_scope_id, agent_slug, uid, status,
		request_id, source, channel, created_by_run_id, run_type, input_message_id, input_payload)
	VALUES ($1, $2, $3, $2, $4, $5, 'pending', $6, $7, $8, $9, $10,
		coalesce($11::bigint, (SELECT id FROM messages WHERE conversation_id = $3 AND request_id = $6 AND role = 'user'
			ORDER BY id DESC LIMIT 1)), $12)`

func insertRunArgs(n NewRun) ([]any, error) {
	payload, err := json.Marshal(n.Payload)
	if err != nil {
		return nil, err
	}
	var input *int64
	if n.InputMessageID != 0 {
		input = &n.InputMessageID
	}
	return []any{n.ID, n.ThreadID, n.ConversationID, n.AgentSlug, n.UID, n.RequestID, n.Source, n.Channel,
		n.CreatedByRunID, n.RunType, input, payload}, nil
}

// createErr maps the insert's failure: the one-active-run index refusing a
// second run is ErrThreadBusy.
func createErr(err error) error {
	if postgres.IsUniqueViolation(err, "uq_agent_runs_one_active_per_thread") {
		return ErrThreadBusy
	}
	if err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	return nil
}

// CreateTx inserts a pending run inside tx (a pgx.Tx, or a connection inside
// BEGIN). The caller holds the thread's row lock (thread.Lock), under which
// the one-active-run index cannot refuse; if it does anyway the statement
// fails with ErrThreadBusy and the caller's transaction is aborted. The caller
// emits the first step event in the same transaction.
func (s *Store) CreateTx(ctx context.Context, tx postgres.DB, n NewRun) (Run, error) {
	args, err := insertRunArgs(n)
	if err != nil {
		return Run{}, err
	}
	r, err := scanRun(tx.QueryRow(ctx, insertRunSQL+` RETURNING `+runCols, args...))
	if err := createErr(err); err != nil {
		return Run{}, err
	}
	return r, nil
}

// QueueCreate queues CreateTx's insert on b, to be sent in a pipeline with
// the caller's other statements of the same transaction (intake's fast path
// writes the message, the run and the request in one round trip). With
// n.InputMessageID zero, the input message is found by n.RequestID: queue the
// message's insert ahead of this one. A refused insert makes the batch fail
// with ErrThreadBusy.
func (s *Store) QueueCreate(b *pgx.Batch, n NewRun) error {
	args, err := insertRunArgs(n)
	if err != nil {
		return err
	}
	b.Queue(insertRunSQL+` RETURNING id`, args...).QueryRow(func(row pgx.Row) error {
		var id string
		return createErr(row.Scan(&id))
	})
	return nil
}

// View is the public shape of a run (GET /api/agent/runs/{id}).
type View struct {
	ID              string          `json:"id"`
	ThreadID        string          `json:"thread_id"`
	ConversationID  int64           `json:"conversation_id"`
	RuntimeScopeID  string          `json:"runtime_scope_id"`
	AgentSlug       string          `json:"agent_slug"`
	UID             string          `json:"uid"`
	Status          string          `json:"status"`
	RequestID       string          `json:"request_id"`
	Source          string          `json:"source"`
	Channel         string          `json:"channel"`
	RunType         string          `json:"run_type"`
	CreatedByRunID  *string         `json:"created_by_run_id"`
	InputMessageID  *int64          `json:"input_message_id"`
	OutputMessageID *int64          `json:"output_message_id"`
	InputPayload    map[string]any  `json:"input_payload"`
	TokenUsage      json.RawMessage `json:"token_usage"`
	ErrorType       *string         `json:"error_type"`
	ErrorMessage    *string         `json:"error_message"`
	StepCount       int             `json:"step_count"`
	AttemptCount    int             `json:"attempt_count"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
}

// View returns the public shape of r.
func (r Run) View() View {
	usage := r.TokenUsage
	if len(usage) == 0 {
		usage = json.RawMessage("null")
	}
	return View{
		ID: r.ID, ThreadID: r.ThreadID, ConversationID: r.ConversationID, RuntimeScopeID: r.RuntimeScopeID,
		AgentSlug: r.AgentSlug, UID: r.UID, Status: r.Status, RequestID: r.RequestID, Source: r.Source,
		Channel: r.Channel, RunType: r.RunType, CreatedByRunID: r.CreatedByRunID, InputMessageID: r.InputMessageID,
		OutputMessageID: r.OutputMessageID,
		InputPayload:    map[string]any{"model_spec": r.Payload.ModelSpec, "tool_approval_mode": r.Payload.ToolApprovalMode},
		TokenUsage:      usage, ErrorType: r.ErrorType, ErrorMessage: r.ErrorMessage, StepCount: r.StepCount,
		AttemptCount: r.AttemptCount, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}
