package intake

import (
	"context"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// The superadmin dashboard (the original's dashboard_router and
// knowledge_dashboard_router), answered by shared/dashboard from rollups
// kept in the writers' transactions: no route scans messages.

func (s *Server) dashboardRoutes() []Route {
	rs := []Route{
		{"GET", "/api/dashboard/conversations", SuperAdmin, Superadmin, s.dashConversations},
		{"GET", "/api/dashboard/conversations/{thread_id}", SuperAdmin, Superadmin, s.dashConversation},
		{"GET", "/api/dashboard/stats/users", SuperAdmin, Superadmin, s.dashStat((*dashboard.Store).Users)},
		{"GET", "/api/dashboard/stats/tools", SuperAdmin, Superadmin, s.dashStat((*dashboard.Store).Tools)},
		{"GET", "/api/dashboard/stats/agents", SuperAdmin, Superadmin, s.dashStat((*dashboard.Store).Agents)},
		{"GET", "/api/dashboard/stats", SuperAdmin, Superadmin, s.dashStat((*dashboard.Store).Basic)},
		{"GET", "/api/dashboard/feedbacks", SuperAdmin, Superadmin, s.dashFeedbacks},
		{"GET", "/api/dashboard/stats/calls/timeseries", SuperAdmin, Superadmin, s.dashTimeseries},
	}
	if s.d.KBs != nil { // as the original: only with the knowledge capability
		rs = append(rs, Route{"GET", "/api/dashboard/stats/knowledge", SuperAdmin, Superadmin, s.dashStat((*dashboard.Store).Knowledge)})
	}
	return rs
}

func (s *Server) dash() (*dashboard.Store, error) {
	if s.d.Dashboard == nil {
		return nil, failure.New(failure.KindUnavailable, "dashboard_unavailable", "the dashboard is not configured")
	}
	return s.d.Dashboard, nil
}

func (s *Server) dashStat(fn func(*dashboard.Store, context.Context) (map[string]any, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
		d, err := s.dash()
		if err != nil {
			return err
		}
		out, err := fn(d, r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

func (s *Server) dashConversations(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	d, err := s.dash()
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 100)
	if err != nil {
		return err
	}
	offset, err := intQuery(r, "offset", 0)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	out, err := d.Conversations(r.Context(), dashboard.ConversationFilter{UID: q.Get("uid"), AgentID: q.Get("agent_id"),
		Status: q.Get("status"), Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) dashConversation(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	d, err := s.dash()
	if err != nil {
		return err
	}
	out, err := d.Conversation(r.Context(), r.PathValue("thread_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) dashFeedbacks(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	d, err := s.dash()
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 200)
	if err != nil {
		return err
	}
	offset, err := intQuery(r, "offset", 0)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	out, err := d.Feedbacks(r.Context(), q.Get("rating"), q.Get("agent_id"), limit, offset)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) dashTimeseries(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	d, err := s.dash()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	kind := q.Get("type")
	if kind == "" {
		kind = "models"
	}
	out, err := d.Timeseries(r.Context(), kind, q.Get("time_range"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
