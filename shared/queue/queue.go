// Package queue is request intake and the per-thread request queue: every
// message a user sends becomes a request (idempotent on request_id), queued
// FIFO per (user, agent, thread) with the policies enqueue, reject and steer;
// the head is dispatched into a run when the thread is ready. Completed runs
// dispatch the next head (via the dispatcher); failed and cancelled runs pause
// the backlog until the user continues; an interrupted run blocks new
// messages until it is resumed.
//
// Dispatching creates the run in the same transaction, through run (the owner
// of agent_runs): intake's fast path — an idle thread — writes the message,
// the run (run.Store.QueueCreate) and the request in one pipelined round
// trip; the dispatcher (DispatchNext, after run.finished), Continue, Steer,
// CancelRequest and Resume use run.Store.CreateTx. queue owns
// agent_run_requests and only reads agent_runs; it calls run, never the
// other way round.
//
// The thread row lock (SELECT … FOR UPDATE on conversations) serializes every
// queue change of a thread; the database's one-active-run-per-thread index is
// the last line of defence.
//
// Imported by: functions/intake, functions/dispatcher, shared/bootstrap,
// tests. May import: events, shared/run, shared/thread, shared/agent,
// shared/approval, shared/access, shared/outbox, shared/postgres, shared/failure, pgx.
package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// Queue policies.
const (
	PolicyEnqueue = "enqueue"
	PolicyReject  = "reject"
	PolicySteer   = "steer"
)

// Request statuses.
const (
	RequestQueued     = "queued"
	RequestDispatched = "dispatched"
	RequestCancelled  = "cancelled"
	RequestRejected   = "rejected"
	RequestFailed     = "failed"
)

// Models checks model specs against the configured providers.
type Models interface {
	Available(spec string) error
	DefaultModel() string
}

// Notifier wakes request-stream clients of a thread after a queue change.
type Notifier interface {
	NotifyQueue(ctx context.Context, threadID string, payload any) (string, error)
}

// Service is the queue.
type Service struct {
	pool     *pgxpool.Pool
	outbox   *outbox.Outbox
	runs     *run.Store
	agents   *agent.Store
	models   Models
	notifier Notifier
}

// NewService returns the queue service; runs are created through runs, the
// owner of agent_runs. notifier may be nil.
func NewService(pool *pgxpool.Pool, ob *outbox.Outbox, runs *run.Store, agents *agent.Store, models Models, notifier Notifier) *Service {
	return &Service{pool: pool, outbox: ob, runs: runs, agents: agents, models: models, notifier: notifier}
}

// Request is an agent_run_requests row.
type Request struct {
	ID              int64           `json:"-"`
	RequestID       string          `json:"request_id"`
	UID             string          `json:"uid"`
	AgentSlug       string          `json:"agent_slug"`
	ThreadID        string          `json:"thread_id"`
	Source          string          `json:"source"`
	Channel         string          `json:"channel"`
	QueuePolicy     string          `json:"queue_policy"`
	Status          string          `json:"status"`
	InputMessageID  int64           `json:"input_message_id"`
	DispatchedRunID *string         `json:"dispatched_run_id"`
	InputPayload    json.RawMessage `json:"-"`
	ErrorMessage    *string         `json:"error_message"`
	CreatedAt       time.Time       `json:"created_at"`
	DispatchedAt    *time.Time      `json:"dispatched_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	// Filled by views.
	QueuePosition *int    `json:"queue_position,omitempty"`
	Content       *string `json:"content,omitempty"`
}

const requestCols = `id, request_id, uid, agent_slug, conversation_thread_id, source, channel, queue_policy, status,
	input_message_id, dispatched_run_id, input_payload, error_message, created_at, dispatched_at, updated_at`

func scanRequest(row pgx.Row) (Request, error) {
	var r Request
	err := row.Scan(&r.ID, &r.RequestID, &r.UID, &r.AgentSlug, &r.ThreadID, &r.Source, &r.Channel, &r.QueuePolicy, &r.Status,
		&r.InputMessageID, &r.DispatchedRunID, &r.InputPayload, &r.ErrorMessage, &r.CreatedAt, &r.DispatchedAt, &r.UpdatedAt)
	return r, err
}

// ErrRequestNotFound covers unknown requests and other users' requests.
var ErrRequestNotFound = failure.NotFound("request_not_found", "request not found")

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ValidateRequestID checks a client-chosen request id.
func ValidateRequestID(id string) error {
	if !requestIDPattern.MatchString(id) {
		return failure.Unprocessable("invalid_request_id", "request_id must be 1 to 64 characters of [A-Za-z0-9._:-]")
	}
	return nil
}

// NewID returns a random id with a prefix.
func NewID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Scope identifies one queue: a user's agent on a thread.
type Scope struct {
	UID            string
	AgentSlug      string
	ThreadID       string
	ConversationID int64
}

// State is the derived state of a queue.
type State struct {
	Status        string  `json:"status"` // idle | running | interrupted | paused | ready
	PausedReason  *string `json:"paused_reason"`
	BlockingRunID *string `json:"blocking_run_id"`
	CanContinue   bool    `json:"can_continue"`
	head          *Request
}

func head(ctx context.Context, db postgres.DB, sc Scope) (*Request, error) {
	r, err := scanRequest(db.QueryRow(ctx, `SELECT `+requestCols+` FROM agent_run_requests
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued'
		ORDER BY (queue_policy <> 'steer'), created_at, id LIMIT 1`, sc.UID, sc.AgentSlug, sc.ThreadID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Service) state(ctx context.Context, db postgres.DB, sc Scope) (State, error) {
	runs, err := s.runs.ThreadRunsTx(ctx, db, sc.UID, sc.AgentSlug, sc.ThreadID)
	if err != nil {
		return State{}, err
	}
	h, err := head(ctx, db, sc)
	if err != nil {
		return State{}, err
	}
	if active := runs.Active; active != nil {
		return State{Status: "running", BlockingRunID: &active.ID, head: h}, nil
	}
	latest := runs.Latest
	if latest != nil && latest.Status == run.StatusInterrupted {
		return State{Status: "interrupted", BlockingRunID: &latest.ID, head: h}, nil
	}
	if h == nil {
		return State{Status: "idle"}, nil
	}
	if latest != nil && (latest.Status == run.StatusFailed || latest.Status == run.StatusCancelled) &&
		latest.FinishedAt != nil && !h.CreatedAt.After(*latest.FinishedAt) {
		reason := latest.Status
		return State{Status: "paused", PausedReason: &reason, BlockingRunID: &latest.ID, CanContinue: true, head: h}, nil
	}
	return State{Status: "ready", head: h}, nil
}

// position returns the 1-based queue position of a queued request: steers
// first, in the order they were sent, then the others in theirs.
func position(ctx context.Context, db postgres.DB, r Request) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM agent_run_requests
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued'
		  AND ((queue_policy = 'steer') = $6 AND (created_at, id) < ($4, $5) OR queue_policy = 'steer' AND NOT $6)`,
		r.UID, r.AgentSlug, r.ThreadID, r.CreatedAt, r.ID, r.QueuePolicy == PolicySteer).Scan(&n)
	return n + 1, err
}

// dispatchHead turns the queue head into a pending run when the queue is
// ready (or paused, with force). It returns the dispatched request, if any.
func (s *Service) dispatchHead(ctx context.Context, tx postgres.DB, emit outbox.Emit, sc Scope, force bool) (*Request, string, error) {
	st, err := s.state(ctx, tx, sc)
	if err != nil {
		return nil, "", err
	}
	if st.Status != "ready" && !(force && st.Status == "paused") {
		return nil, "", nil
	}
	h := st.head
	var payload run.Payload
	if err := json.Unmarshal(h.InputPayload, &payload); err != nil {
		return nil, "", fmt.Errorf("decode payload of request %s: %w", h.RequestID, err)
	}
	runID := NewID("run_")
	_, err = s.runs.CreateTx(ctx, tx, run.NewRun{
		ID: runID, ThreadID: sc.ThreadID, ConversationID: sc.ConversationID, AgentSlug: sc.AgentSlug, UID: sc.UID,
		RequestID: h.RequestID, Source: h.Source, Channel: h.Channel, RunType: run.TypeChat,
		InputMessageID: h.InputMessageID, Payload: payload,
	})
	if err != nil {
		return nil, "", err
	}
	join := []Request{*h}
	if h.QueuePolicy == PolicySteer {
		// Every steer waiting joins this run, in the order they were sent:
		// the run sees them all, and no steer ends the run of the one before.
		if join, err = queuedSteers(ctx, tx, sc); err != nil {
			return nil, "", err
		}
	}
	for _, r := range join {
		if _, err := tx.Exec(ctx, `UPDATE messages SET run_id = $2, delivery_status = 'dispatched', transcript_seq = nextval('transcript_seq')
			WHERE id = $1`, r.InputMessageID, runID); err != nil {
			return nil, "", err
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_run_requests SET status = 'dispatched', dispatched_run_id = $2, dispatched_at = clock_timestamp(),
			updated_at = clock_timestamp() WHERE id = $1`, r.ID, runID); err != nil {
			return nil, "", err
		}
	}
	h.Status, h.DispatchedRunID = RequestDispatched, &runID
	err = emit(outbox.Pending{
		Payload:   events.StepReady{RunID: runID, ThreadID: sc.ThreadID, StepNo: 1},
		DedupeKey: "step:" + runID + ":1",
	})
	return h, runID, err
}

// queuedSteers are the steer requests queued on sc, oldest first (the
// queue's head first).
func queuedSteers(ctx context.Context, db postgres.DB, sc Scope) ([]Request, error) {
	rows, err := db.Query(ctx, `SELECT `+requestCols+` FROM agent_run_requests
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued' AND queue_policy = 'steer'
		ORDER BY created_at, id`, sc.UID, sc.AgentSlug, sc.ThreadID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Request, error) { return scanRequest(row) })
}

func (s *Service) notify(ctx context.Context, threadID string, what string) {
	if s.notifier == nil {
		return
	}
	_, _ = s.notifier.NotifyQueue(context.WithoutCancel(ctx), threadID, map[string]any{"change": what})
}

// lockScope locks uid's thread in tx and returns the queue's scope on it.
func lockScope(ctx context.Context, tx pgx.Tx, uid, agentSlug, threadID string) (Scope, error) {
	l, err := thread.Lock(ctx, tx, uid, threadID)
	if err != nil {
		return Scope{}, err
	}
	return Scope{UID: uid, AgentSlug: agentSlug, ThreadID: threadID, ConversationID: l.ConversationID}, nil
}

// DispatchNext dispatches the head of (uid, agent, thread) if the queue is
// ready. The dispatcher calls it when a run finished. It is idempotent.
func (s *Service) DispatchNext(ctx context.Context, uid, agentSlug, threadID string) (string, error) {
	var runID string
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		sc, err := lockScope(ctx, tx, uid, agentSlug, threadID)
		if errors.Is(err, thread.ErrNotFound) {
			return nil // thread deleted: nothing to dispatch
		}
		if err != nil {
			return err
		}
		_, runID, err = s.dispatchHead(ctx, tx, emit, sc, false)
		return err
	})
	if err == nil && runID != "" {
		s.notify(ctx, threadID, "dispatched")
	}
	return runID, err
}

// Key names one queue: a user's agent on a thread.
type Key struct {
	UID       string
	AgentSlug string
	ThreadID  string
}

// ReadyQueues lists queues that have requests queued longer than olderThan
// but no active run: candidates for dispatch when a run.finished event was
// lost (the dispatcher's sweep calls DispatchNext on each).
func (s *Service) ReadyQueues(ctx context.Context, olderThan time.Duration, limit int) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT q.uid, q.agent_slug, q.conversation_thread_id FROM agent_run_requests q
		WHERE q.status = 'queued' AND q.created_at < clock_timestamp() - $1::interval
		  AND NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.uid = q.uid AND r.agent_slug = q.agent_slug
		      AND r.conversation_thread_id = q.conversation_thread_id AND r.status IN ('pending', 'running', 'cancel_requested'))
		LIMIT $2`, olderThan.String(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.UID, &k.AgentSlug, &k.ThreadID); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func trimmed(s string) string { return strings.TrimSpace(s) }
