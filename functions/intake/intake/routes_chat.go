package intake

import (
	"io"
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/chatimage"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// chatCall is POST /api/chat/call: one question to a model, no thread.
func (s *Server) chatCall(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in invoke.SimpleCallInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	def := ""
	if s.d.SysConfig != nil {
		if snap, err := s.d.SysConfig.Get(r.Context()); err == nil {
			def = snap.String("default_model")
		}
	}
	out, err := s.inv.SimpleCall(r.Context(), in, def)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) threadState(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	include := false
	if v := r.URL.Query().Get("include_messages"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return failure.Unprocessable("invalid_query", "include_messages must be true or false")
		}
		include = b
	}
	st, err := s.inv.ThreadState(r.Context(), p.UID, r.PathValue("thread_id"), include)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) searchThreads(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := intQuery(r, "limit", 20)
	if err != nil {
		return err
	}
	offset, err := intQuery(r, "offset", 0)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	res, err := s.d.Threads.Search(r.Context(), p.UID, thread.SearchInput{Q: q.Get("q"), AgentID: q.Get("agent_id"), Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) markViewed(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	v, err := s.d.Threads.MarkViewed(r.Context(), p.UID, r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// messageID parses {message_id}; a malformed id is as unknown as a missing one.
func messageID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("message_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, thread.ErrMessageNotFound
	}
	return id, nil
}

func (s *Server) submitFeedback(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := messageID(r)
	if err != nil {
		return err
	}
	var in thread.FeedbackInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	f, err := s.d.Threads.SubmitFeedback(r.Context(), p.UID, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) getFeedback(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := messageID(r)
	if err != nil {
		return err
	}
	f, err := s.d.Threads.GetFeedback(r.Context(), p.UID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"has_feedback": f != nil, "feedback": f})
	return nil
}

// uploadChatImage is POST /api/chat/image/upload (multipart field "file").
func (s *Server) uploadChatImage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if s.d.ChatImages == nil {
		return failure.New(failure.KindUnavailable, "uploads_unavailable", "chat images are not configured")
	}
	r.Body = http.MaxBytesReader(w, r.Body, chatimage.MaxUploadBytes+(64<<10))
	part, err := filePart(w, r)
	if err != nil {
		if bodyTooLarge(err) {
			return chatimage.ErrTooLarge
		}
		return err
	}
	out, err := s.d.ChatImages.Upload(r.Context(), p.UID, part.FileName(), chatImageBody{part})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// chatImageBody maps the body limit cutting a read to image_too_large.
type chatImageBody struct{ r io.Reader }

func (b chatImageBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && bodyTooLarge(err) {
		return n, chatimage.ErrTooLarge
	}
	return n, err
}

// Projects (project_router).

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ps, err := s.d.Threads.Projects(r.Context(), p.UID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": ps})
	return nil
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in thread.ProjectInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	pr, err := s.d.Threads.CreateProject(r.Context(), p.UID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pr)
	return nil
}

// deleteProject deletes one of the caller's projects and its working
// folder (its threads stay, outside any project).
func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Threads.DeleteProject(r.Context(), p.UID, r.PathValue("project_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) projectHistoryCandidates(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := intQuery(r, "limit", 20)
	if err != nil {
		return err
	}
	hs, err := s.d.Threads.HistoryCandidates(r.Context(), p.UID, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": hs})
	return nil
}
