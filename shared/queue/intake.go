package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// Submission is a message sent to an agent on a thread.
type Submission struct {
	Subject      access.Subject
	Query        string
	AgentSlug    string
	ThreadID     string
	RequestID    string // optional; generated when empty
	ImageContent *string
	ModelSpec    string
	QueuePolicy  string
	Source       string // chat (default)
	Channel      string // web (default)
	// ToolApprovalMode is default (when empty) or always_trust.
	ToolApprovalMode string
	// InvocationMeta is kept in the input message's extra_metadata as
	// agent_invocation_meta (the original's place for an invocation's
	// context, e.g. {"evaluation": {dataset_name, dataset_item_id,
	// experiment_name}} of an evaluation sample); nil: not written.
	InvocationMeta map[string]any
}

// Intake is the answer to a submission (spec §3.2).
type Intake struct {
	RequestID        string  `json:"request_id"`
	Status           string  `json:"status"` // queued | dispatched | rejected
	QueuePolicy      string  `json:"queue_policy"`
	QueuePosition    *int    `json:"queue_position"`
	MessageID        int64   `json:"message_id"`
	RunID            *string `json:"run_id"`
	StreamURL        *string `json:"stream_url"`
	RequestEventsURL *string `json:"request_events_url"`
	ThreadID         string  `json:"thread_id"`
}

// Errors of intake.
var (
	ErrRunInterrupted    = failure.Conflict("run_interrupted", "the latest run on this thread is waiting for your answer; resume it before sending new messages")
	ErrRequestIDConflict = failure.Conflict("request_id_conflict", "request_id was already used for a different request")
	ErrRunNotSteerable   = failure.Conflict("run_not_steerable", "the active run cannot be steered")
)

// ValidatePolicy normalises and checks a queue policy.
func ValidatePolicy(p string) (string, error) {
	switch p {
	case "":
		return PolicyEnqueue, nil
	case PolicyEnqueue, PolicyReject, PolicySteer:
		return p, nil
	case "guided", "bridge":
		return "", failure.Unprocessable("queue_policy_not_implemented", "queue_policy %q is not implemented", p)
	}
	return "", failure.Unprocessable("invalid_queue_policy", "queue_policy must be enqueue, reject or steer")
}

// Submit takes a message in: idempotent on request_id, serialized per thread.
func (s *Service) Submit(ctx context.Context, sub Submission) (Intake, error) {
	policy, err := ValidatePolicy(sub.QueuePolicy)
	if err != nil {
		return Intake{}, err
	}
	sub.QueuePolicy = policy
	if trimmed(sub.Query) == "" && (sub.ImageContent == nil || *sub.ImageContent == "") {
		return Intake{}, failure.Unprocessable("empty_query", "query must not be empty")
	}
	if len(sub.Query) > 200_000 {
		return Intake{}, failure.New(failure.KindTooLarge, "query_too_large", "query is longer than 200000 bytes")
	}
	if sub.ThreadID == "" {
		return Intake{}, failure.Unprocessable("missing_thread_id", "thread_id is required; create one with POST /api/chat/thread")
	}
	if sub.AgentSlug == "" {
		return Intake{}, failure.Unprocessable("missing_agent_slug", "agent_slug is required")
	}
	if sub.RequestID == "" {
		sub.RequestID = NewID("req_")
	} else if err := ValidateRequestID(sub.RequestID); err != nil {
		return Intake{}, err
	}
	if sub.Source == "" {
		sub.Source = "chat"
	}
	if sub.Channel == "" {
		sub.Channel = "web"
	}
	var out Intake
	for attempt := 0; attempt < 2; attempt++ {
		out, err = s.submitOnce(ctx, sub)
		// A concurrent submit with the same request_id on another thread won
		// the unique index: go round once more to answer as an idempotent replay.
		if postgres.IsUniqueViolation(err, "agent_run_requests_uid_request_id_key") {
			continue
		}
		break
	}
	if err != nil {
		return Intake{}, err
	}
	s.notify(ctx, sub.ThreadID, out.Status)
	return out, nil
}

// threadState is what intake reads under the thread lock, in one statement.
type threadState struct {
	conversationID int64
	existing       bool // a request with this request_id exists
	runWithID      bool // a run with this request_id exists
	latestID       *string
	latestStatus   *string
	activeID       *string
	activeStatus   *string
	activeType     *string
	queued, steers int
	approvalMode   string // the thread's tool_approval_mode override, if any
}

const threadStateSQL = `
	SELECT
		EXISTS (SELECT 1 FROM agent_run_requests WHERE uid = $1 AND request_id = $4),
		EXISTS (SELECT 1 FROM agent_runs WHERE uid = $1 AND request_id = $4),
		l.id, l.status, a.id, a.status, a.run_type,
		(SELECT count(*) FROM agent_run_requests WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued'),
		(SELECT count(*) FROM agent_run_requests WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued' AND queue_policy = 'steer')
	FROM (SELECT 1) one
	LEFT JOIN LATERAL (SELECT id, status FROM agent_runs WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3
		AND run_type IN ('chat', 'resume') ORDER BY created_at DESC, id DESC LIMIT 1) l ON true
	LEFT JOIN LATERAL (SELECT id, status, run_type FROM agent_runs WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3
		AND status IN ('pending', 'running', 'cancel_requested')) a ON true`

// insertRequestSQL writes the user's message and its request in one
// statement; $13 (a run id) marks both dispatched: the message joins the
// transcript (messages.run_id is checked at commit, so the run may follow).
const insertRequestSQL = `
	WITH m AS (
		INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, image_content, request_id,
			delivery_status, run_id, transcript_seq)
		VALUES ($1, 'user', $2, $3, $4, $5, $6, CASE WHEN $13::text IS NULL THEN $7 ELSE 'dispatched' END, $13,
			CASE WHEN $13::text IS NULL THEN NULL ELSE nextval('transcript_seq') END)
		RETURNING id)
	INSERT INTO agent_run_requests (request_id, uid, agent_slug, conversation_thread_id, source, channel, queue_policy, status,
		input_message_id, input_payload, error_message, dispatched_run_id, dispatched_at)
	SELECT $6, $10, $9, $8, $11, $12, $14, CASE WHEN $13::text IS NULL THEN $7 ELSE 'dispatched' END, m.id, $15,
		CASE WHEN $7 = 'rejected' THEN 'the thread is busy' END, $13, CASE WHEN $13::text IS NULL THEN NULL ELSE clock_timestamp() END
	FROM m
	RETURNING ` + requestCols

// insertMessageSQL writes the user's message of a request dispatched at once;
// the run (run.Store.QueueCreate) and then the request (insertDispatchedSQL)
// follow in the same pipeline: the request references the run, the run the
// message.
const insertMessageSQL = `
	INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, image_content, request_id,
		delivery_status, run_id, transcript_seq)
	VALUES ($1, 'user', $2, $3, $4, $5, $6, 'dispatched', $7, nextval('transcript_seq'))`

// insertDispatchedSQL writes the request of insertMessageSQL's message ($5),
// dispatched into run $6.
const insertDispatchedSQL = `
	INSERT INTO agent_run_requests (request_id, uid, agent_slug, conversation_thread_id, source, channel, queue_policy, status,
		input_message_id, input_payload, dispatched_run_id, dispatched_at)
	SELECT $1, $2, $3, $4, $5, $6, $7, 'dispatched', m.id, $8, $9, clock_timestamp()
	FROM (SELECT id FROM messages WHERE conversation_id = $10 AND request_id = $1 AND role = 'user' ORDER BY id DESC LIMIT 1) m
	RETURNING ` + requestCols

// submitOnce takes a message in with two pipelined round trips on one
// connection: the first opens the transaction, locks the thread and reads its
// queue state and the agent; the second writes the message, the request and — when the
// thread is idle — the run and its first step event, and commits. Rare cases
// (a replayed request id, a paused backlog) take the general path.
func (s *Service) submitOnce(ctx context.Context, sub Submission) (Intake, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Intake{}, err
	}
	defer conn.Release()
	open := true
	defer func() {
		if open {
			if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
				conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // discarded
			}
		}
	}()

	var st threadState
	found := false
	b1 := &pgx.Batch{}
	b1.Queue("BEGIN")
	b1.Queue(`SELECT id, coalesce(extra_metadata->>'tool_approval_mode', '') FROM conversations
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted' FOR UPDATE`,
		sub.ThreadID, sub.Subject.UID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&st.conversationID, &st.approvalMode)
		found = err == nil
		return noRows(err)
	})
	b1.Queue(threadStateSQL, sub.Subject.UID, sub.AgentSlug, sub.ThreadID, sub.RequestID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.existing, &st.runWithID, &st.latestID, &st.latestStatus, &st.activeID, &st.activeStatus, &st.activeType, &st.queued, &st.steers)
	})
	// The agent is read in the same round trip (one connection per request):
	// its definition is not part of the thread's serialization, but the read
	// costs the lock nothing measurable.
	var ar struct {
		ag  agent.Agent
		err error
	}
	s.agents.QueueGet(b1, sub.Subject, sub.AgentSlug, func(a agent.Agent, err error) { ar.ag, ar.err = a, err })
	err = conn.SendBatch(ctx, b1).Close()
	if err != nil {
		return Intake{}, fmt.Errorf("read thread queue: %w", err)
	}
	if !found {
		return Intake{}, thread.ErrNotFound
	}
	if st.existing {
		open = false
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return Intake{}, err
		}
		return s.replay(ctx, sub)
	}
	if st.runWithID {
		return Intake{}, ErrRequestIDConflict
	}
	if ar.err != nil {
		return Intake{}, ar.err
	}
	if st.latestStatus != nil && *st.latestStatus == run.StatusInterrupted {
		// A run whose only waits are expired tool approvals no longer blocks
		// the thread: its calls are resolved as rejected (expired) here, in
		// the message's transaction.
		expired, err := s.runs.ResolveExpiredApprovalsTx(ctx, conn, *st.latestID)
		if err != nil {
			return Intake{}, err
		}
		if !expired {
			return Intake{}, ErrRunInterrupted.With(map[string]any{"run_id": *st.latestID})
		}
	}
	if sub.QueuePolicy == PolicySteer && st.activeID != nil {
		if *st.activeStatus != run.StatusRunning || *st.activeType != run.TypeChat {
			return Intake{}, ErrRunNotSteerable.With(map[string]any{"active_run_id": *st.activeID, "active_run_status": *st.activeStatus})
		}
		// Several steers may wait: they reach the run (and a running
		// sub-agent of it) in the order they were sent.
	}
	sc := Scope{UID: sub.Subject.UID, AgentSlug: sub.AgentSlug, ThreadID: sub.ThreadID, ConversationID: st.conversationID}
	meta := map[string]any{"request_id": sub.RequestID, "source": sub.Source, "channel": sub.Channel}
	if sub.InvocationMeta != nil {
		meta["agent_invocation_meta"] = sub.InvocationMeta
	}
	metaJSON, _ := json.Marshal(meta)
	status, payload := RequestQueued, []byte("{}")
	var runPayload run.Payload
	var runID *string
	switch {
	case sub.QueuePolicy == PolicyReject && (st.activeID != nil || st.queued > 0):
		status = RequestRejected
	default:
		actx, err := ar.ag.Context()
		if err != nil {
			return Intake{}, err
		}
		resolved := actx.Resolve()
		spec := sub.ModelSpec
		if spec == "" {
			spec = resolved.Model
		}
		if spec == "" {
			spec = s.models.DefaultModel()
		}
		if spec == "" {
			return Intake{}, failure.Unprocessable("model_not_configured", "no model: set the agent's model, send model_spec, or configure YUXI_DEFAULT_MODEL")
		}
		if err := s.models.Available(spec); err != nil {
			return Intake{}, err
		}
		resolved.Model = spec
		// request → thread override → agent context → default
		mode := sub.ToolApprovalMode
		for _, m := range []string{st.approvalMode, resolved.ToolApprovalMode} {
			if mode == "" && approval.ValidMode(m) {
				mode = m
			}
		}
		if mode == "" {
			mode = approval.ModeDefault
		}
		runPayload = run.Payload{ModelSpec: spec, ToolApprovalMode: mode, Context: resolved}
		payload, _ = json.Marshal(runPayload)
		if st.activeID == nil && st.queued == 0 {
			// Idle thread: the request is the queue's ready head (an empty
			// queue cannot be paused); dispatch it in the same statement.
			id := NewID("run_")
			runID = &id
		}
	}
	policy := sub.QueuePolicy
	if status == RequestRejected {
		policy = PolicyReject
	}
	var req Request
	var rows []outbox.Row
	b2 := &pgx.Batch{}
	scanReq := func(row pgx.Row) error {
		var err error
		req, err = scanRequest(row)
		return err
	}
	if runID == nil {
		b2.Queue(insertRequestSQL, sc.ConversationID, sub.Query, messageType(sub), metaJSON, sub.ImageContent, sub.RequestID,
			status, sc.ThreadID, sc.AgentSlug, sc.UID, sub.Source, sub.Channel, runID, policy, payload).QueryRow(scanReq)
	} else {
		// Dispatched at once: message, run (written by its owner, run) and
		// request, pipelined in this round trip.
		b2.Queue(insertMessageSQL, sc.ConversationID, sub.Query, messageType(sub), metaJSON, sub.ImageContent, sub.RequestID, *runID)
		if err := s.runs.QueueCreate(b2, run.NewRun{ID: *runID, ThreadID: sc.ThreadID, ConversationID: sc.ConversationID,
			AgentSlug: sc.AgentSlug, UID: sc.UID, RequestID: sub.RequestID, Source: sub.Source, Channel: sub.Channel,
			RunType: run.TypeChat, Payload: runPayload}); err != nil {
			return Intake{}, err
		}
		b2.Queue(insertDispatchedSQL, sub.RequestID, sc.UID, sc.AgentSlug, sc.ThreadID, sub.Source, sub.Channel, policy,
			payload, *runID, sc.ConversationID).QueryRow(scanReq)
		if err := s.outbox.Writer.QueueWrite(ctx, b2, &rows, outbox.Pending{
			Payload: events.StepReady{RunID: *runID, ThreadID: sc.ThreadID, StepNo: 1}, DedupeKey: "step:" + *runID + ":1"}); err != nil {
			return Intake{}, err
		}
	}
	if status != RequestRejected {
		b2.Queue(`UPDATE conversations SET updated_at = now() WHERE id = $1`, sc.ConversationID)
	}
	general := runID == nil && status == RequestQueued && st.activeID == nil // a backlog without an active run: paused, or ready
	if !general {
		b2.Queue("COMMIT")
	}
	if err := conn.SendBatch(ctx, b2).Close(); err != nil {
		return Intake{}, err
	}
	if general {
		emit := func(p ...outbox.Pending) error {
			r, err := s.outbox.Writer.Write(ctx, conn, p...)
			rows = append(rows, r...)
			return err
		}
		d, _, err := s.dispatchHead(ctx, conn, emit, sc, false)
		if err != nil {
			return Intake{}, err
		}
		if d != nil && d.ID == req.ID {
			req = *d
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return Intake{}, err
		}
	}
	open = false
	s.outbox.Publish(ctx, rows)
	out := Intake{RequestID: req.RequestID, Status: req.Status, QueuePolicy: req.QueuePolicy, MessageID: req.InputMessageID, ThreadID: req.ThreadID}
	switch req.Status {
	case RequestQueued:
		pos := st.queued + 1 // behind every queued request (steers sort first)
		if req.QueuePolicy == PolicySteer {
			pos = st.steers + 1 // behind the steers sent before it
		}
		if general {
			if pos, err = position(ctx, s.pool, req); err != nil {
				return Intake{}, err
			}
		}
		u := RequestEventsURL(req.RequestID)
		out.QueuePosition, out.RequestEventsURL = &pos, &u
	case RequestDispatched:
		u := StreamURL(*req.DispatchedRunID)
		out.RunID, out.StreamURL = req.DispatchedRunID, &u
	}
	return out, nil
}

// replay answers a submission whose request_id was seen before: the same
// scope gets the request's current state, another scope a conflict.
func (s *Service) replay(ctx context.Context, sub Submission) (Intake, error) {
	existing, err := s.requestByID(ctx, s.pool, sub.Subject.UID, sub.RequestID)
	if err != nil {
		return Intake{}, err
	}
	if existing.UID != sub.Subject.UID || existing.AgentSlug != sub.AgentSlug || existing.ThreadID != sub.ThreadID ||
		existing.Source != sub.Source || existing.Channel != sub.Channel || existing.QueuePolicy != sub.QueuePolicy {
		return Intake{}, ErrRequestIDConflict
	}
	return s.intakeView(ctx, s.pool, existing)
}

func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

func messageType(sub Submission) string {
	if sub.ImageContent != nil && *sub.ImageContent != "" {
		return "multimodal_image"
	}
	return "text"
}

// requestByID reads uid's request: request ids are per user (another
// user's request of the same id is not there).
func (s *Service) requestByID(ctx context.Context, db postgres.DB, uid, requestID string) (Request, error) {
	r, err := scanRequest(db.QueryRow(ctx, `SELECT `+requestCols+` FROM agent_run_requests WHERE uid = $1 AND request_id = $2`, uid, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Request{}, ErrRequestNotFound
	}
	return r, err
}

// StreamURL is where a run's events are served.
func StreamURL(runID string) string { return "/api/agent/runs/" + runID + "/events" }

// RequestEventsURL is where a request's queue events are served.
func RequestEventsURL(requestID string) string { return "/api/agent/requests/" + requestID + "/events" }

func (s *Service) intakeView(ctx context.Context, db postgres.DB, r Request) (Intake, error) {
	out := Intake{RequestID: r.RequestID, Status: r.Status, QueuePolicy: r.QueuePolicy, MessageID: r.InputMessageID, ThreadID: r.ThreadID}
	switch r.Status {
	case RequestQueued:
		pos, err := position(ctx, db, r)
		if err != nil {
			return Intake{}, err
		}
		u := RequestEventsURL(r.RequestID)
		out.QueuePosition, out.RequestEventsURL = &pos, &u
	case RequestDispatched:
		u := StreamURL(*r.DispatchedRunID)
		out.RunID, out.StreamURL = r.DispatchedRunID, &u
	}
	return out, nil
}
