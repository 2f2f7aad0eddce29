package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

func (s *Server) createThread(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in thread.CreateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.AgentID == "" {
		return failure.Unprocessable("invalid_thread", "agent_id is required")
	}
	if _, err := s.d.Agents.Get(r.Context(), subject(p), in.AgentID); err != nil {
		return err
	}
	t, err := s.d.Threads.Create(r.Context(), p.UID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func intQuery(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, failure.Unprocessable("invalid_query", "%s must be a non-negative integer", name)
	}
	return n, nil
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	limit, err := intQuery(r, "limit", 100)
	if err == nil && limit > 500 {
		err = failure.Unprocessable("invalid_query", "limit must be at most 500")
	}
	offset, err2 := intQuery(r, "offset", 0)
	if err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	list, err := s.d.Threads.List(r.Context(), p.UID, r.URL.Query().Get("agent_id"), limit, offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) updateThread(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in thread.UpdateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	t, err := s.d.Threads.Update(r.Context(), p.UID, r.PathValue("thread_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := s.d.Threads.Delete(r.Context(), p.UID, r.PathValue("thread_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "thread_id": r.PathValue("thread_id")})
	return nil
}

// threadHistory answers the whole history, as the original's clients
// expect; with ?limit= (and ?before=<message id>) one page of the newest
// messages before that one, plus has_more.
func (s *Server) threadHistory(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	if !q.Has("limit") && !q.Has("before") {
		h, err := s.d.Threads.History(r.Context(), p.UID, r.PathValue("thread_id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"history": h})
		return nil
	}
	limit, before := 100, int64(0)
	var err error
	if v := q.Get("limit"); q.Has("limit") {
		if limit, err = strconv.Atoi(v); err != nil {
			return failure.Unprocessable("invalid_limit", "limit must be an integer")
		}
	}
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before <= 0 {
			return thread.ErrHistoryBefore
		}
	}
	h, more, err := s.d.Threads.HistoryPage(r.Context(), p.UID, r.PathValue("thread_id"), limit, before)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"history": h, "has_more": more})
	return nil
}
