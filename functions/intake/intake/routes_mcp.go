package intake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
)

// mcpRoutes: the original's mcp_router (ten routes). Admins configure and
// operate servers; a plain user sees only the redacted list. Header values
// are stored sealed and never returned.
func (s *Server) mcpRoutes() []Route {
	return []Route{
		{"GET", "/api/system/mcp-servers", User, NoCheck, s.listMCPServers},
		{"POST", "/api/system/mcp-servers", Admin, NoCheck, s.createMCPServer},
		{"GET", "/api/system/mcp-servers/{slug}", Admin, NoCheck, s.getMCPServer},
		{"PUT", "/api/system/mcp-servers/{slug}", Admin, NoCheck, s.updateMCPServer},
		{"DELETE", "/api/system/mcp-servers/{slug}", Admin, NoCheck, s.deleteMCPServer},
		{"POST", "/api/system/mcp-servers/{slug}/test", Admin, NoCheck, s.testMCPServer},
		{"PUT", "/api/system/mcp-servers/{slug}/status", Admin, NoCheck, s.setMCPServerStatus},
		{"GET", "/api/system/mcp-servers/{slug}/tools", Admin, NoCheck, s.mcpServerTools},
		{"POST", "/api/system/mcp-servers/{slug}/tools/refresh", Admin, NoCheck, s.refreshMCPServerTools},
		{"PUT", "/api/system/mcp-servers/{slug}/tools/{tool_name}/toggle", Admin, NoCheck, s.toggleMCPServerTool},
		// Beyond the original: an admin's test call of one tool (the web UI's
		// "Test" in the MCP screen), whether or not the tool is switched off.
		{"POST", "/api/system/mcp-servers/{slug}/tools/{tool_name}/call", Admin, NoCheck, s.callMCPServerTool},
	}
}

func (s *Server) listMCPServers(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	servers, err := s.d.MCP.Store().List(r.Context())
	if err != nil {
		return err
	}
	if p.IsAdmin() {
		out := make([]mcp.View, len(servers))
		for i, sv := range servers {
			out[i] = sv.View()
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": out})
		return nil
	}
	out := make([]mcp.PublicView, len(servers))
	for i, sv := range servers {
		out[i] = sv.PublicView()
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": out})
	return nil
}

func (s *Server) createMCPServer(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in mcp.Input
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Transport == nil || in.Name == nil {
		return failure.Invalid("invalid_request", "name and transport are required")
	}
	sv, err := s.d.MCP.Store().Create(r.Context(), in, p.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": sv.View()})
	return nil
}

func (s *Server) getMCPServer(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sv, err := s.d.MCP.Store().Get(r.Context(), r.PathValue("slug"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": sv.View()})
	return nil
}

func (s *Server) updateMCPServer(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in mcp.Input
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Slug != nil && *in.Slug != r.PathValue("slug") {
		return failure.Unprocessable("slug_immutable", "a server's slug cannot change")
	}
	sv, err := s.d.MCP.Store().Update(r.Context(), r.PathValue("slug"), in, p.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": sv.View()})
	return nil
}

func (s *Server) deleteMCPServer(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	slug := r.PathValue("slug")
	if err := s.d.MCP.Store().Delete(r.Context(), slug); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": fmt.Sprintf("server %q deleted", slug)})
	return nil
}

// mcpFetch lists a server's tools; a server that cannot be reached is 422
// mcp_unreachable (the configuration is what is wrong, not the platform).
func (s *Server) mcpFetch(r *http.Request, refresh bool) (mcp.Server, []mcp.ToolDef, error) {
	sv, err := s.d.MCP.Store().Get(r.Context(), r.PathValue("slug"))
	if err != nil {
		return sv, nil, err
	}
	defs, err := s.d.MCP.ServerTools(r.Context(), sv, refresh)
	if err != nil {
		return sv, nil, failure.Unprocessable("mcp_unreachable", "MCP server %q: %v", sv.Slug, err)
	}
	return sv, defs, nil
}

func (s *Server) testMCPServer(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	_, defs, err := s.mcpFetch(r, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": fmt.Sprintf("connected, %d tools found", len(defs)), "tool_count": len(defs)})
	return nil
}

func (s *Server) setMCPServerStatus(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if in.Enabled == nil {
		return failure.Invalid("invalid_request", "enabled is required")
	}
	sv, err := s.d.MCP.Store().SetEnabled(r.Context(), r.PathValue("slug"), *in.Enabled, p.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "enabled": sv.Enabled, "data": sv.View(),
		"message": fmt.Sprintf("MCP server %q %s", sv.Slug, map[bool]string{true: "enabled", false: "disabled"}[sv.Enabled])})
	return nil
}

type mcpToolView struct {
	Name        string `json:"name"`
	ID          string `json:"id"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	Parameters  any    `json:"parameters"`
	Required    any    `json:"required"`
}

func (s *Server) mcpServerTools(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sv, defs, err := s.mcpFetch(r, false)
	if err != nil {
		return err
	}
	out := make([]mcpToolView, len(defs))
	for i, d := range defs {
		var schema struct {
			Properties any `json:"properties"`
			Required   any `json:"required"`
		}
		_ = json.Unmarshal(d.InputSchema, &schema)
		if schema.Properties == nil {
			schema.Properties = map[string]any{}
		}
		if schema.Required == nil {
			schema.Required = []string{}
		}
		out[i] = mcpToolView{Name: d.Name, ID: mcp.ToolName(sv.Slug, d.Name), Title: d.Title, Description: d.Description,
			Enabled: !slices.Contains(sv.DisabledTools, d.Name), Parameters: schema.Properties, Required: schema.Required}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": out, "total": len(out)})
	return nil
}

func (s *Server) refreshMCPServerTools(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sv, defs, err := s.mcpFetch(r, true)
	if err != nil {
		return err
	}
	disabled := 0
	for _, d := range defs {
		if slices.Contains(sv.DisabledTools, d.Name) {
			disabled++
		}
	}
	enabled := len(defs) - disabled
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": fmt.Sprintf("tool list refreshed: %d enabled, %d disabled", enabled, disabled),
		"tool_count": enabled, "enabled_count": enabled, "disabled_count": disabled})
	return nil
}

func (s *Server) toggleMCPServerTool(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	name := r.PathValue("tool_name")
	enabled, err := s.d.MCP.Store().ToggleTool(r.Context(), r.PathValue("slug"), name, p.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "tool_name": name, "enabled": enabled,
		"message": fmt.Sprintf("tool %q %s", name, map[bool]string{true: "enabled", false: "disabled"}[enabled])})
	return nil
}

// mcpCallTimeout bounds an admin's test call of an MCP tool.
const mcpCallTimeout = 60 * time.Second

// callMCPServerTool calls one tool with {"arguments": {...}} and answers its
// text and is_error (the tool's own failure is a result, not an error). A
// tool the server does not list is 404 mcp_tool_not_found; a server that
// cannot be reached or refuses the call is 422 mcp_call_failed.
func (s *Server) callMCPServerTool(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		Arguments map[string]any `json:"arguments"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	sv, defs, err := s.mcpFetch(r, false)
	if err != nil {
		return err
	}
	name := r.PathValue("tool_name")
	if !slices.ContainsFunc(defs, func(d mcp.ToolDef) bool { return d.Name == name }) {
		return failure.NotFound("mcp_tool_not_found", "MCP server %q has no tool %q", sv.Slug, name)
	}
	if in.Arguments == nil {
		in.Arguments = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(r.Context(), mcpCallTimeout)
	defer cancel()
	started := time.Now()
	res, err := s.d.MCP.Pool().CallTool(ctx, sv, name, in.Arguments)
	if err != nil {
		return failure.Unprocessable("mcp_call_failed", "MCP tool %q of %q: %v", name, sv.Slug, err)
	}
	s.log.Info("mcp tool test call", "slug", sv.Slug, "tool", name, "user_id", p.UserID, "is_error", res.IsError)
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "tool_name": name, "is_error": res.IsError, "text": res.Text,
		"duration_ms": time.Since(started).Milliseconds()})
	return nil
}
