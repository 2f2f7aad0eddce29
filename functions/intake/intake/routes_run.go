package intake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/userfiles"
)

type submitBody struct {
	Query        string          `json:"query"`
	AgentSlug    string          `json:"agent_slug"`
	ThreadID     string          `json:"thread_id"`
	RequestID    string          `json:"request_id"`
	Meta         *submitMeta     `json:"meta"`
	ImageContent *string         `json:"image_content"`
	ModelSpec    string          `json:"model_spec"`
	QueuePolicy  string          `json:"queue_policy"`
	Resume       json.RawMessage `json:"resume"`
	CreatedBy    string          `json:"created_by_run_id"`
	ToolApproval string          `json:"tool_approval_mode"`
}

type submitMeta struct {
	RequestID         string   `json:"request_id"`
	AttachmentFileIDs []string `json:"attachment_file_ids"`
	// ImageID names an image from /api/chat/image/upload: the user message
	// carries it and references it (chatimage.Store.Bind).
	ImageID string `json:"image_id"`
}

// submitRun is request intake (contracts §3.2), or a resume run when resume is set.
func (s *Server) submitRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in submitBody
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	requestID := in.RequestID
	if in.Meta != nil && in.Meta.RequestID != "" {
		requestID = in.Meta.RequestID
	}
	switch in.ToolApproval {
	case "", "default", "always_trust":
	default:
		return failure.Unprocessable("invalid_tool_approval_mode", "tool_approval_mode must be default or always_trust")
	}
	if len(in.Resume) > 0 && string(in.Resume) != "null" {
		if in.QueuePolicy != "" && in.QueuePolicy != queue.PolicyEnqueue {
			return failure.Unprocessable("invalid_queue_policy", "a resume must use queue_policy enqueue")
		}
		out, err := s.d.Queue.Resume(r.Context(), queue.ResumeInput{Subject: subject(p), AgentSlug: in.AgentSlug, ThreadID: in.ThreadID,
			Resume: in.Resume, CreatedByRunID: in.CreatedBy, RequestID: requestID})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if err := s.d.Guard.CheckInput(r.Context(), in.Query); err != nil {
		return err
	}
	imageID := ""
	if in.Meta != nil && in.Meta.ImageID != "" {
		if s.d.ChatImages == nil {
			return failure.New(failure.KindUnavailable, "uploads_unavailable", "chat images are not configured")
		}
		content, err := s.d.ChatImages.Content(r.Context(), p.UID, in.Meta.ImageID)
		if err != nil {
			return err
		}
		imageID, in.ImageContent = in.Meta.ImageID, &content
	}
	query := in.Query
	if in.Meta != nil && len(in.Meta.AttachmentFileIDs) > 0 {
		// Bind the thread's attachments to this request (422 when one is not
		// the thread's or another request's) and name their sandbox paths.
		if requestID == "" {
			requestID = queue.NewID("req_")
		}
		note, err := userfiles.AttachmentNote(r.Context(), s.d.Threads, p.UID, in.ThreadID, requestID, in.Meta.AttachmentFileIDs)
		if err != nil {
			return err
		}
		query += note
	}
	out, err := s.d.Queue.Submit(r.Context(), queue.Submission{Subject: subject(p), Query: query, AgentSlug: in.AgentSlug,
		ThreadID: in.ThreadID, RequestID: requestID, ImageContent: in.ImageContent, ModelSpec: in.ModelSpec, QueuePolicy: in.QueuePolicy,
		ToolApprovalMode: in.ToolApproval})
	if err != nil {
		return err
	}
	if imageID != "" {
		// The message carries the image already; a concurrent second use
		// only loses the reference (and the sweep keeps the object).
		if err := s.d.ChatImages.Bind(r.Context(), p.UID, imageID, out.MessageID); err != nil {
			s.log.Warn("chat image not bound", "image_id", imageID, "message_id", out.MessageID, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ru, err := s.d.Runs.GetForUser(r.Context(), p.UID, r.PathValue("run_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": ru.View()})
	return nil
}

// runResult is the final result payload (contracts §3.6). The output is read
// only through the run's output_message_id.
func (s *Server) runResult(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ru, err := s.d.Runs.GetForUser(r.Context(), p.UID, r.PathValue("run_id"))
	if err != nil {
		return err
	}
	output, err := s.d.Runs.Output(r.Context(), ru)
	if err != nil {
		return err
	}
	usage := ru.TokenUsage
	if len(usage) == 0 {
		usage = json.RawMessage(`{"available":false}`)
	}
	res := map[string]any{
		"status": ru.Status, "output": output, "agent_slug": ru.AgentSlug, "thread_id": ru.ThreadID,
		"conversation_id": ru.ConversationID, "agent_run_id": ru.ID, "request_id": ru.RequestID,
		"final_message_id": ru.OutputMessageID, "langfuse_trace_id": nil, "token_usage": usage,
	}
	if ru.ErrorType != nil || ru.ErrorMessage != nil {
		res["error"] = map[string]any{"type": ru.ErrorType, "message": ru.ErrorMessage}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// cancelRun cancels a run: a pending run ends at once; a running run is
// signalled and stops streaming promptly, ending cancelled at the step boundary.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ru, outcome, err := s.d.Runs.RequestCancel(r.Context(), p.UID, r.PathValue("run_id"))
	if err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	switch outcome {
	case run.CancelImmediate: // run closed the stream
		if s.d.Queue != nil {
			_, _ = s.d.Stream.NotifyQueue(ctx, ru.ThreadID, map[string]any{"change": "run_cancelled"})
		}
	case run.CancelRequested:
		if err := s.d.Stream.SignalCancel(ctx, ru.ID); err != nil {
			s.log.Warn("signal cancel", "run", ru.ID, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": ru.View()})
	return nil
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ru, err := s.d.Runs.GetForUser(r.Context(), p.UID, r.PathValue("run_id"))
	if err != nil {
		return err
	}
	runstream.ServeRun(w, r, s.d.Hub, runstream.RunStreamOptions{
		RunID: ru.ID, ThreadID: ru.ThreadID, RequestID: ru.RequestID, Terminal: run.IsTerminal(ru.Status), Status: ru.Status,
		Heartbeat: s.d.SSEHeartbeat, MaxDuration: s.d.SSEMaxDuration, Verbose: r.URL.Query().Get("verbose") != "false",
	})
	return nil
}

func (s *Server) getRequest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req, err := s.d.Queue.GetRequest(r.Context(), p.UID, r.PathValue("request_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"request": req})
	return nil
}

func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req, err := s.d.Queue.CancelRequest(r.Context(), p.UID, r.PathValue("request_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"request": req})
	return nil
}

func (s *Server) steerRequest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req, err := s.d.Queue.Steer(r.Context(), p.UID, r.PathValue("request_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"request": req})
	return nil
}

func (s *Server) threadRequests(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	snap, err := s.d.Queue.Snapshot(r.Context(), p.UID, r.URL.Query().Get("agent_slug"), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

func (s *Server) continueRequests(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req, err := s.d.Queue.Continue(r.Context(), p.UID, r.URL.Query().Get("agent_slug"), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	out := map[string]any{"request": req, "run_id": req.DispatchedRunID}
	if req.DispatchedRunID != nil {
		out["stream_url"] = queue.StreamURL(*req.DispatchedRunID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// activeRun returns the thread's latest chat/resume run while it is not
// finished (interrupted counts: it waits for the user), else {run: null}.
func (s *Server) activeRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	t, err := s.d.Threads.Get(r.Context(), p.UID, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	agentSlug := r.URL.Query().Get("agent_slug")
	if agentSlug == "" {
		agentSlug = t.AgentID
	}
	latest, err := s.d.Runs.LatestForThread(r.Context(), p.UID, agentSlug, t.ID)
	if err != nil {
		return err
	}
	if latest == nil || (run.IsTerminal(latest.Status) && latest.Status != run.StatusInterrupted) {
		writeJSON(w, http.StatusOK, map[string]any{"run": nil})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": latest.View()})
	return nil
}

// requestEvents is the request SSE (contracts §3.8): queued (when the
// position changes), then run_created or a terminal status, then close. It
// wakes on the thread's queue stream and reads the request's state only then.
func (s *Server) requestEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req, err := s.d.Queue.GetRequest(r.Context(), p.UID, r.PathValue("request_id"))
	if err != nil {
		return err
	}
	lastPos := -1
	check := func(ctx context.Context, sw *runstream.EventWriter) (bool, error) {
		cur, err := s.d.Queue.GetRequest(ctx, p.UID, req.RequestID)
		if err != nil {
			if errors.Is(err, queue.ErrRequestNotFound) {
				data, _ := json.Marshal(map[string]any{"request_id": req.RequestID, "message": "request not found"})
				sw.Event("error", "", data)
				return true, nil
			}
			return true, err
		}
		switch cur.Status {
		case queue.RequestQueued:
			if cur.QueuePosition != nil && *cur.QueuePosition != lastPos {
				lastPos = *cur.QueuePosition
				data, _ := json.Marshal(map[string]any{"request_id": cur.RequestID, "status": "queued", "position": lastPos})
				sw.Event("queued", "", data)
			}
			return false, nil
		case queue.RequestDispatched:
			data, _ := json.Marshal(map[string]any{"request_id": cur.RequestID, "run_id": cur.DispatchedRunID,
				"stream_url": queue.StreamURL(*cur.DispatchedRunID)})
			sw.Event("run_created", "", data)
			return true, nil
		default:
			data, _ := json.Marshal(map[string]any{"request_id": cur.RequestID, "status": cur.Status})
			sw.Event(cur.Status, "", data)
			return true, nil
		}
	}
	err = runstream.ServeStream(w, r, s.d.Hub, s.d.Hub.QueueKey(req.ThreadID), runstream.CursorNew, runstream.StreamOptions{
		Heartbeat: s.d.SSEHeartbeat, MaxDuration: s.d.SSEMaxDuration,
	}, runstream.StreamHooks{
		CaughtUp: check,
		Entries: func(ctx context.Context, sw *runstream.EventWriter, _ []runstream.Entry) (bool, error) {
			return check(ctx, sw)
		},
	})
	if err != nil && !runstream.IsClientError(err) {
		s.log.Debug("request stream ended", "request", req.RequestID, "error", err)
	}
	return nil
}
