package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// threadRoutes: conversations and their history (/api/chat/thread…).
func (s *Server) threadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/chat/thread", s.user(s.createThread))
	mux.HandleFunc("GET /api/chat/threads", s.user(s.listThreads))
	mux.HandleFunc("PUT /api/chat/thread/{thread_id}", s.user(s.updateThread))
	mux.HandleFunc("DELETE /api/chat/thread/{thread_id}", s.user(s.deleteThread))
	mux.HandleFunc("GET /api/chat/thread/{thread_id}/history", s.user(s.threadHistory))
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var in thread.CreateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	if in.AgentID == "" {
		writeError(w, s.log, failure.Unprocessable("invalid_thread", "agent_id is required"))
		return
	}
	if _, err := s.d.Agents.Get(r.Context(), s.d.Pool, subject(p), in.AgentID); err != nil {
		writeError(w, s.log, err)
		return
	}
	t, err := s.d.Threads.Create(r.Context(), p.UID, in)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
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

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	limit, err := intQuery(r, "limit", 100)
	if err == nil && limit > 500 {
		err = failure.Unprocessable("invalid_query", "limit must be at most 500")
	}
	offset, err2 := intQuery(r, "offset", 0)
	if err == nil {
		err = err2
	}
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list, err := s.d.Threads.List(r.Context(), p.UID, r.URL.Query().Get("agent_id"), limit, offset)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) updateThread(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var in thread.UpdateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	t, err := s.d.Threads.Update(r.Context(), p.UID, r.PathValue("thread_id"), in)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	if err := s.d.Threads.Delete(r.Context(), p.UID, r.PathValue("thread_id")); err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "thread_id": r.PathValue("thread_id")})
}

func (s *Server) threadHistory(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	h, err := s.d.Threads.History(r.Context(), p.UID, r.PathValue("thread_id"))
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"history": h})
}
