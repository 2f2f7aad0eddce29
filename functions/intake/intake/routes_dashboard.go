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

// withDash answers what call returns from the dashboard (503 when the
// deployment has none), as the original: the object itself, no envelope.
func (s *Server) withDash(w http.ResponseWriter, call func(*dashboard.Store) (any, error)) error {
	d, err := s.dash()
	if err != nil {
		return err
	}
	out, err := call(d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) dashStat(fn func(*dashboard.Store, context.Context) (map[string]any, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
		return s.withDash(w, func(d *dashboard.Store) (any, error) { return fn(d, r.Context()) })
	}
}

func (s *Server) dashConversations(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withDash(w, func(d *dashboard.Store) (any, error) {
		limit, err := intQuery(r, "limit", 100)
		if err != nil {
			return nil, err
		}
		offset, err := intQuery(r, "offset", 0)
		if err != nil {
			return nil, err
		}
		q := r.URL.Query()
		return d.Conversations(r.Context(), dashboard.ConversationFilter{UID: q.Get("uid"), AgentID: q.Get("agent_id"),
			Status: q.Get("status"), Limit: limit, Offset: offset})
	})
}

func (s *Server) dashConversation(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withDash(w, func(d *dashboard.Store) (any, error) { return d.Conversation(r.Context(), r.PathValue("thread_id")) })
}

func (s *Server) dashFeedbacks(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withDash(w, func(d *dashboard.Store) (any, error) {
		limit, err := intQuery(r, "limit", 200)
		if err != nil {
			return nil, err
		}
		offset, err := intQuery(r, "offset", 0)
		if err != nil {
			return nil, err
		}
		q := r.URL.Query()
		return d.Feedbacks(r.Context(), q.Get("rating"), q.Get("agent_id"), limit, offset)
	})
}

func (s *Server) dashTimeseries(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.withDash(w, func(d *dashboard.Store) (any, error) {
		q := r.URL.Query()
		kind := q.Get("type")
		if kind == "" {
			kind = "models"
		}
		return d.Timeseries(r.Context(), kind, q.Get("time_range"))
	})
}
