package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// GetRequest returns uid's request with its queue position and content.
func (s *Service) GetRequest(ctx context.Context, uid, requestID string) (Request, error) {
	r, err := s.requestByID(ctx, s.pool, uid, requestID)
	if err != nil {
		return Request{}, err
	}
	if r.UID != uid {
		return Request{}, ErrRequestNotFound
	}
	return s.decorate(ctx, s.pool, r)
}

func (s *Service) decorate(ctx context.Context, db postgres.DB, r Request) (Request, error) {
	if r.Status == RequestQueued {
		p, err := position(ctx, db, r)
		if err != nil {
			return r, err
		}
		r.QueuePosition = &p
	}
	var content string
	if err := db.QueryRow(ctx, `SELECT content FROM messages WHERE id = $1`, r.InputMessageID).Scan(&content); err == nil {
		r.Content = &content
	}
	return r, nil
}

// Snapshot is GET /api/agent/thread/{id}/requests.
type Snapshot struct {
	Requests []Request `json:"requests"`
	Queue    State     `json:"queue"`
}

// Snapshot returns the queued requests of uid's thread and the queue state.
func (s *Service) Snapshot(ctx context.Context, uid, agentSlug, threadID string) (Snapshot, error) {
	var out Snapshot
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var conv int64
		if err := tx.QueryRow(ctx, `SELECT id FROM conversations WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted'`, threadID, uid).Scan(&conv); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return failure.NotFound("thread_not_found", "thread not found")
			}
			return err
		}
		if agentSlug == "" {
			if err := tx.QueryRow(ctx, `SELECT agent_id FROM conversations WHERE id = $1`, conv).Scan(&agentSlug); err != nil {
				return err
			}
		}
		sc := Scope{UID: uid, AgentSlug: agentSlug, ThreadID: threadID, ConversationID: conv}
		st, err := s.state(ctx, tx, sc)
		if err != nil {
			return err
		}
		out.Queue = st
		rows, err := tx.Query(ctx, `SELECT `+requestCols+` FROM agent_run_requests
			WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued'
			ORDER BY (queue_policy <> 'steer'), created_at, id`, uid, agentSlug, threadID)
		if err != nil {
			return err
		}
		var list []Request
		for rows.Next() {
			r, err := scanRequest(rows)
			if err != nil {
				rows.Close()
				return err
			}
			list = append(list, r)
		}
		rows.Close()
		out.Requests = make([]Request, 0, len(list))
		for i, r := range list {
			p := i + 1
			r.QueuePosition = &p
			var content string
			if err := tx.QueryRow(ctx, `SELECT content FROM messages WHERE id = $1`, r.InputMessageID).Scan(&content); err == nil {
				r.Content = &content
			}
			out.Requests = append(out.Requests, r)
		}
		return nil
	})
	return out, err
}

// Continue resumes a paused queue by dispatching its head.
func (s *Service) Continue(ctx context.Context, uid, agentSlug, threadID string) (Request, error) {
	var out *Request
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		sc, err := lockScope(ctx, tx, uid, agentSlug, threadID)
		if err != nil {
			return err
		}
		if sc.AgentSlug == "" {
			if err := tx.QueryRow(ctx, `SELECT agent_id FROM conversations WHERE id = $1`, sc.ConversationID).Scan(&sc.AgentSlug); err != nil {
				return err
			}
		}
		st, err := s.state(ctx, tx, sc)
		if err != nil {
			return err
		}
		switch st.Status {
		case "idle":
			return failure.Conflict("queue_empty", "there is no queued request to continue")
		case "running":
			return failure.Conflict("run_active", "a run is active on this thread").With(map[string]any{"run_id": *st.BlockingRunID})
		case "interrupted":
			return ErrRunInterrupted.With(map[string]any{"run_id": *st.BlockingRunID})
		case "ready":
			return failure.Conflict("queue_not_paused", "the queue is not paused")
		}
		out, _, err = s.dispatchHead(ctx, tx, emit, sc, true)
		return err
	})
	if err != nil {
		return Request{}, err
	}
	if out == nil {
		return Request{}, failure.Conflict("queue_not_paused", "the queue could not be continued")
	}
	s.notify(ctx, threadID, "dispatched")
	return *out, nil
}

// CancelRequest cancels uid's queued request. A dispatched request answers
// 409 request_already_dispatched with its run id.
func (s *Service) CancelRequest(ctx context.Context, uid, requestID string) (Request, error) {
	return s.changeRequest(ctx, uid, requestID, "cancelled", func(tx pgx.Tx, emit outbox.Emit, sc Scope, cur Request) (Request, error) {
		switch cur.Status {
		case RequestDispatched:
			return Request{}, failure.Conflict("request_already_dispatched", "the request already started a run").With(map[string]any{"run_id": *cur.DispatchedRunID})
		case RequestQueued:
		default:
			return cur, nil // already final: cancelling again is a no-op
		}
		if cur.QueuePolicy == PolicySteer {
			active, err := s.runs.ActiveForThreadTx(ctx, tx, uid, cur.AgentSlug, cur.ThreadID)
			if err != nil {
				return Request{}, err
			}
			if active != nil {
				return Request{}, failure.Conflict("steer_in_progress", "a steer request cannot be cancelled while the run it steers is active")
			}
		}
		out, err := scanRequest(tx.QueryRow(ctx, `UPDATE agent_run_requests SET status = 'cancelled', updated_at = clock_timestamp()
			WHERE id = $1 RETURNING `+requestCols, cur.ID))
		if err != nil {
			return Request{}, err
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET delivery_status = 'cancelled' WHERE id = $1`, cur.InputMessageID); err != nil {
			return Request{}, err
		}
		// Removing a paused head may make the queue ready again.
		_, _, err = s.dispatchHead(ctx, tx, emit, sc, false)
		return out, err
	})
}

// Steer promotes uid's queued enqueue request to steer: it goes first and
// ends the active run at its next model boundary.
func (s *Service) Steer(ctx context.Context, uid, requestID string) (Request, error) {
	out, err := s.changeRequest(ctx, uid, requestID, "steer", func(tx pgx.Tx, emit outbox.Emit, sc Scope, cur Request) (Request, error) {
		if cur.Status != RequestQueued || (cur.Source != "chat" && cur.Source != "channel") {
			return Request{}, failure.Conflict("request_not_queued", "only a queued chat request can be steered")
		}
		if cur.QueuePolicy == PolicySteer {
			return cur, nil
		}
		active, err := s.runs.ActiveForThreadTx(ctx, tx, uid, cur.AgentSlug, cur.ThreadID)
		if err != nil {
			return Request{}, err
		}
		if active != nil && (active.Status != run.StatusRunning || active.RunType != run.TypeChat) {
			return Request{}, ErrRunNotSteerable
		}
		out, err := scanRequest(tx.QueryRow(ctx, `UPDATE agent_run_requests SET queue_policy = 'steer', updated_at = clock_timestamp()
			WHERE id = $1 RETURNING `+requestCols, cur.ID))
		if err != nil {
			return Request{}, err
		}
		if active == nil {
			d, _, err := s.dispatchHead(ctx, tx, emit, sc, false)
			if err != nil {
				return Request{}, err
			}
			if d != nil && d.ID == out.ID {
				out = *d
			}
		}
		return out, nil
	})
	if err != nil {
		return Request{}, err
	}
	return s.decorate(ctx, s.pool, out)
}

// changeRequest runs change on uid's request requestID in one transaction,
// with the request's scope and then its row locked (the order every queue
// writer takes), and notifies the thread with event once it committed.
// change returns the request as it leaves it.
func (s *Service) changeRequest(ctx context.Context, uid, requestID, event string,
	change func(tx pgx.Tx, emit outbox.Emit, sc Scope, cur Request) (Request, error)) (Request, error) {
	r, err := s.requestByID(ctx, s.pool, uid, requestID)
	if err != nil {
		return Request{}, err
	}
	if r.UID != uid {
		return Request{}, ErrRequestNotFound
	}
	var out Request
	err = s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		sc, err := lockScope(ctx, tx, uid, r.AgentSlug, r.ThreadID)
		if err != nil {
			return err
		}
		cur, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestCols+` FROM agent_run_requests WHERE id = $1 FOR UPDATE`, r.ID))
		if err != nil {
			return err
		}
		out, err = change(tx, emit, sc, cur)
		return err
	})
	if err != nil {
		return Request{}, err
	}
	s.notify(ctx, r.ThreadID, event)
	return out, nil
}

// ResumeInput answers an interrupted run.
type ResumeInput struct {
	Subject        access.Subject
	AgentSlug      string
	ThreadID       string
	Resume         json.RawMessage
	CreatedByRunID string
	RequestID      string
}

// Resumed is the answer to a resume submission.
type Resumed struct {
	RunID     string `json:"run_id"`
	ThreadID  string `json:"thread_id"`
	Status    string `json:"status"`
	RequestID string `json:"request_id"`
	StreamURL string `json:"stream_url"`
}

// ValidateResume checks the shape of a resume payload.
func ValidateResume(resume json.RawMessage) error {
	if len(resume) == 0 || string(resume) == "null" {
		return failure.Unprocessable("invalid_resume", "resume must not be empty")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(resume, &obj) == nil {
		if d, ok := obj["decisions"]; ok {
			var decisions []struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(d, &decisions); err != nil || len(decisions) == 0 {
				return failure.Unprocessable("invalid_resume", "decisions must be a non-empty list")
			}
			for _, x := range decisions {
				if x.Type != "approve" && x.Type != "reject" {
					return failure.Unprocessable("invalid_resume", "each decision type must be approve or reject")
				}
			}
		}
	}
	return nil
}

// ResumeRequestID is the deterministic request id of a resume, so that a
// double submit of the same answer is idempotent.
func ResumeRequestID(parentRunID string, resume json.RawMessage) string {
	var v any
	canon := resume
	if json.Unmarshal(resume, &v) == nil {
		canon, _ = json.Marshal(v) // maps marshal with sorted keys
	}
	sum := sha256.Sum256([]byte(parentRunID + ":" + string(canon)))
	return "resume:" + hex.EncodeToString(sum[:])[:48]
}

// Resume creates a resume run from an interrupted run, bypassing the queue.
func (s *Service) Resume(ctx context.Context, in ResumeInput) (Resumed, error) {
	if err := ValidateResume(in.Resume); err != nil {
		return Resumed{}, err
	}
	if in.CreatedByRunID == "" {
		return Resumed{}, failure.Unprocessable("missing_created_by_run_id", "created_by_run_id is required with resume")
	}
	if in.RequestID == "" {
		in.RequestID = ResumeRequestID(in.CreatedByRunID, in.Resume)
	} else if err := ValidateRequestID(in.RequestID); err != nil {
		return Resumed{}, err
	}
	var out Resumed
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		sc, err := lockScope(ctx, tx, in.Subject.UID, in.AgentSlug, in.ThreadID)
		if err != nil {
			return err
		}
		parent, err := s.runs.GetTx(ctx, tx, in.CreatedByRunID)
		if err != nil || parent.UID != in.Subject.UID {
			return run.ErrNotFound
		}
		if parent.ThreadID != in.ThreadID || parent.AgentSlug != in.AgentSlug {
			return failure.Conflict("resume_scope_mismatch", "created_by_run_id belongs to another thread or agent")
		}
		r, err := s.runs.ByRequestTx(ctx, tx, in.Subject.UID, in.RequestID)
		if err == nil {
			if r.CreatedByRunID == nil || *r.CreatedByRunID != parent.ID {
				return ErrRequestIDConflict
			}
			out = Resumed{RunID: r.ID, ThreadID: r.ThreadID, Status: r.Status, RequestID: r.RequestID, StreamURL: StreamURL(r.ID)}
			return nil
		} else if !errors.Is(err, run.ErrNotFound) {
			return err
		}
		if parent.Status != run.StatusInterrupted {
			return run.ErrNotInterrupted
		}
		latest, err := s.runs.LatestForThreadTx(ctx, tx, sc.UID, sc.AgentSlug, sc.ThreadID)
		if err != nil {
			return err
		}
		if latest == nil || latest.ID != parent.ID {
			return run.ErrResumeSuperseded
		}
		active, err := s.runs.ActiveForThreadTx(ctx, tx, sc.UID, sc.AgentSlug, sc.ThreadID)
		if err != nil {
			return err
		}
		if active != nil {
			return run.ErrThreadBusy.With(map[string]any{"active_run_id": active.ID, "active_run_status": active.Status,
				"agent_slug": sc.AgentSlug, "thread_id": sc.ThreadID})
		}
		meta, _ := json.Marshal(map[string]any{"request_id": in.RequestID, "resume": in.Resume, "source": "ask_user_question_resume"})
		var msgID int64
		if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, message_type, extra_metadata, request_id, delivery_status)
			VALUES ($1, 'user', $2, 'resume', $3, $4, 'dispatched') RETURNING id`,
			sc.ConversationID, string(in.Resume), meta, in.RequestID).Scan(&msgID); err != nil {
			return err
		}
		payload := parent.Payload
		payload.Resume = in.Resume
		parentID := parent.ID
		runID := NewID("run_")
		r, err = s.runs.CreateTx(ctx, tx, run.NewRun{ID: runID, ThreadID: sc.ThreadID, ConversationID: sc.ConversationID,
			AgentSlug: sc.AgentSlug, UID: sc.UID, RequestID: in.RequestID, Source: parent.Source, Channel: parent.Channel,
			RunType: run.TypeResume, CreatedByRunID: &parentID, InputMessageID: msgID, Payload: payload})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE messages SET run_id = $2 WHERE id = $1`, msgID, runID); err != nil {
			return err
		}
		out = Resumed{RunID: r.ID, ThreadID: r.ThreadID, Status: r.Status, RequestID: r.RequestID, StreamURL: StreamURL(r.ID)}
		// Answers the questions, applies tool approval decisions and starts
		// the run (step 1, or the approved calls first).
		return s.runs.StartResumeTx(ctx, tx, emit, parent.ID, r, in.Resume)
	})
	if err != nil {
		return Resumed{}, err
	}
	s.notify(ctx, in.ThreadID, "resumed")
	return out, nil
}

// PendingSteers returns the steer requests queued on uid's (agent,
// thread), oldest first: agent-step shows them to a running sub-agent of
// that thread's run at its next model call (storing each in the child's
// transcript once), while the parent handles them itself once its run
// reaches its boundary.
func (s *Service) PendingSteers(ctx context.Context, uid, agentSlug, threadID string) ([]run.Steer, error) {
	rows, err := s.pool.Query(ctx, `SELECT q.request_id, m.content FROM agent_run_requests q JOIN messages m ON m.id = q.input_message_id
		WHERE q.uid = $1 AND q.agent_slug = $2 AND q.conversation_thread_id = $3 AND q.status = 'queued' AND q.queue_policy = 'steer'
		ORDER BY q.created_at, q.id`, uid, agentSlug, threadID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (run.Steer, error) {
		var st run.Steer
		err := row.Scan(&st.RequestID, &st.Content)
		return st, err
	})
}
