package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func subject(p auth.Principal) access.Subject {
	return access.Subject{UID: p.UID, Role: p.Role, DepartmentID: p.DepartmentID}
}

type backendInfo struct {
	ID                string                `json:"id"`
	Name              string                `json:"name"`
	Description       string                `json:"description"`
	ConfigurableItems map[string]agent.Item `json:"configurable_items"`
	ItemOrder         []string              `json:"configurable_item_order"`
}

func (s *Server) backend(p auth.Principal) backendInfo {
	var opts []agent.Option
	if s.d.Tools != nil {
		for _, t := range s.d.Tools.Specs() {
			opts = append(opts, agent.Option{Value: t.Name, Label: t.DisplayName, Description: t.Description})
		}
	}
	items := agent.Items(opts, p.IsAdmin())
	info := backendInfo{ID: agent.BackendChatbot, Name: "Chatbot", Description: "A tool-using chat agent.", ConfigurableItems: map[string]agent.Item{}}
	for _, it := range items {
		info.ConfigurableItems[it.Key] = it
		info.ItemOrder = append(info.ItemOrder, it.Key)
	}
	return info
}

func (s *Server) listBackends(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"backends": []backendInfo{s.backend(p)}})
	return nil
}

func (s *Server) getBackend(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if r.PathValue("backend_id") != agent.BackendChatbot {
		return failure.NotFound("backend_not_found", "agent backend %q not found", r.PathValue("backend_id"))
	}
	writeJSON(w, http.StatusOK, s.backend(p))
	return nil
}

type agentDetail struct {
	agent.Agent
	ConfigurableItems map[string]agent.Item `json:"configurable_items"`
}

func (s *Server) detail(p auth.Principal, a agent.Agent) agentDetail {
	return agentDetail{Agent: a, ConfigurableItems: s.backend(p).ConfigurableItems}
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.Agents.List(r.Context(), subject(p), r.URL.Query().Get("include_subagents") == "true")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": list})
	return nil
}

func (s *Server) defaultAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	a, err := s.d.Agents.Default(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(p, a))
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	a, err := s.d.Agents.Get(r.Context(), subject(p), r.PathValue("agent_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(p, a))
	return nil
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in agent.Input
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	a, err := s.d.Agents.Create(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(p, a))
	return nil
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in agent.Input
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	a, err := s.d.Agents.Update(r.Context(), subject(p), r.PathValue("agent_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(p, a))
	return nil
}

func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	slug := r.PathValue("agent_id")
	if err := s.d.Agents.Delete(r.Context(), subject(p), slug); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "slug": slug})
	return nil
}

func (s *Server) setDefaultAgent(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	slug := r.PathValue("agent_id")
	// An admin may only make an agent it can see the default: check before
	// the move, so that a 404 changes nothing.
	if _, err := s.d.Agents.Get(r.Context(), subject(p), slug); err != nil {
		return err
	}
	if err := s.d.Agents.SetDefault(r.Context(), slug); err != nil {
		return err
	}
	a, err := s.d.Agents.Get(r.Context(), subject(p), slug)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(p, a))
	return nil
}

// listTools answers GET /api/system/tools[?category=…] as the original's
// tool_router: {success, data: [{id, slug, name (display), display_name,
// description, category, tags, parameters}]}.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": s.d.Tools.Listings(r.URL.Query().Get("category"))})
	return nil
}

// toolOptions answers GET /api/system/tools/options: {success, data: [{label, value}]}.
func (s *Server) toolOptions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": s.d.Tools.Options()})
	return nil
}
