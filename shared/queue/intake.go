package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/run"
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
	ErrRunInterrupted      = failure.Conflict("run_interrupted", "the latest run on this thread is waiting for your answer; resume it before sending new messages")
	ErrRequestIDConflict   = failure.Conflict("request_id_conflict", "request_id was already used for a different request")
	ErrRunNotSteerable     = failure.Conflict("run_not_steerable", "the active run cannot be steered")
	ErrSteerAlreadyPending = failure.Conflict("steer_already_pending", "a steer request is already waiting on this thread")
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
		err = s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
			var err error
			out, err = s.submitTx(ctx, tx, emit, sub)
			return err
		})
		// A concurrent submit with the same request_id on another thread won
		// the unique index: go round once more to answer as an idempotent replay.
		if postgres.IsUniqueViolation(err, "agent_run_requests_request_id_key") {
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

func (s *Service) submitTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, sub Submission) (Intake, error) {
	sc, err := lockScope(ctx, tx, sub.Subject.UID, sub.AgentSlug, sub.ThreadID)
	if err != nil {
		return Intake{}, err
	}
	if existing, err := s.requestByID(ctx, tx, sub.RequestID); err == nil {
		if existing.UID != sub.Subject.UID || existing.AgentSlug != sub.AgentSlug || existing.ThreadID != sub.ThreadID ||
			existing.Source != sub.Source || existing.Channel != sub.Channel || existing.QueuePolicy != sub.QueuePolicy {
			return Intake{}, ErrRequestIDConflict
		}
		return s.intakeView(ctx, tx, existing)
	} else if !errors.Is(err, ErrRequestNotFound) {
		return Intake{}, err
	}
	var runWithID bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_runs WHERE request_id = $1)`, sub.RequestID).Scan(&runWithID); err != nil {
		return Intake{}, err
	}
	if runWithID {
		return Intake{}, ErrRequestIDConflict
	}
	ag, err := s.agents.Get(ctx, tx, sub.Subject, sub.AgentSlug)
	if err != nil {
		return Intake{}, err
	}
	latest, err := run.LatestForThread(ctx, tx, sc.UID, sc.AgentSlug, sc.ThreadID)
	if err != nil {
		return Intake{}, err
	}
	if latest != nil && latest.Status == run.StatusInterrupted {
		return Intake{}, ErrRunInterrupted.With(map[string]any{"run_id": latest.ID})
	}
	active, err := run.ActiveForThread(ctx, tx, sc.UID, sc.AgentSlug, sc.ThreadID)
	if err != nil {
		return Intake{}, err
	}
	var queued, steers int
	if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE queue_policy = 'steer') FROM agent_run_requests
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued'`,
		sc.UID, sc.AgentSlug, sc.ThreadID).Scan(&queued, &steers); err != nil {
		return Intake{}, err
	}
	if sub.QueuePolicy == PolicySteer && active != nil {
		if active.Status != run.StatusRunning || active.RunType != run.TypeChat {
			return Intake{}, ErrRunNotSteerable.With(map[string]any{"active_run_id": active.ID, "active_run_status": active.Status})
		}
		if steers > 0 {
			return Intake{}, ErrSteerAlreadyPending
		}
	}
	metaJSON, _ := json.Marshal(map[string]any{"request_id": sub.RequestID, "source": sub.Source, "channel": sub.Channel})
	if sub.QueuePolicy == PolicyReject && (active != nil || queued > 0) {
		var msgID int64
		if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, image_content, request_id, delivery_status)
			VALUES ($1, 'user', $2, $3, $4, $5, $6, 'rejected') RETURNING id`,
			sc.ConversationID, sub.Query, messageType(sub), metaJSON, sub.ImageContent, sub.RequestID).Scan(&msgID); err != nil {
			return Intake{}, err
		}
		r, err := scanRequest(tx.QueryRow(ctx, `INSERT INTO agent_run_requests (request_id, uid, agent_slug, conversation_thread_id, source, channel,
			queue_policy, status, input_message_id, input_payload, error_message)
			VALUES ($1, $2, $3, $4, $5, $6, 'reject', 'rejected', $7, '{}', 'the thread is busy') RETURNING `+requestCols,
			sub.RequestID, sc.UID, sc.AgentSlug, sc.ThreadID, sub.Source, sub.Channel, msgID))
		if err != nil {
			return Intake{}, err
		}
		return s.intakeView(ctx, tx, r)
	}
	actx, err := ag.Context()
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
	payload, _ := json.Marshal(run.Payload{ModelSpec: spec, ToolApprovalMode: "default", Context: resolved})
	var msgID int64
	if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, image_content, request_id, delivery_status)
		VALUES ($1, 'user', $2, $3, $4, $5, $6, 'queued') RETURNING id`,
		sc.ConversationID, sub.Query, messageType(sub), metaJSON, sub.ImageContent, sub.RequestID).Scan(&msgID); err != nil {
		return Intake{}, fmt.Errorf("insert message: %w", err)
	}
	r, err := scanRequest(tx.QueryRow(ctx, `INSERT INTO agent_run_requests (request_id, uid, agent_slug, conversation_thread_id, source, channel,
		queue_policy, status, input_message_id, input_payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9) RETURNING `+requestCols,
		sub.RequestID, sc.UID, sc.AgentSlug, sc.ThreadID, sub.Source, sub.Channel, sub.QueuePolicy, msgID, payload))
	if err != nil {
		return Intake{}, err
	}
	dispatched, _, err := dispatchHead(ctx, tx, emit, sc, false)
	if err != nil {
		return Intake{}, err
	}
	if dispatched != nil && dispatched.ID == r.ID {
		r = *dispatched
	}
	if _, err := tx.Exec(ctx, `UPDATE conversations SET updated_at = now() WHERE id = $1`, sc.ConversationID); err != nil {
		return Intake{}, err
	}
	return s.intakeView(ctx, tx, r)
}

func messageType(sub Submission) string {
	if sub.ImageContent != nil && *sub.ImageContent != "" {
		return "multimodal_image"
	}
	return "text"
}

func (s *Service) requestByID(ctx context.Context, db postgres.DB, requestID string) (Request, error) {
	r, err := scanRequest(db.QueryRow(ctx, `SELECT `+requestCols+` FROM agent_run_requests WHERE request_id = $1`, requestID))
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
