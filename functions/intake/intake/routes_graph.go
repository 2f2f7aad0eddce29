package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
)

// The /api/graph/* routes (the original's graph_router): admin, and read
// access to the knowledge base named by ?kb_id= (graph.Service checks it).

func (s *Server) graphService() (*graph.Service, error) {
	if s.graph == nil {
		return nil, failure.NotFound("graph_unavailable", "the knowledge graph is not configured")
	}
	return s.graph, nil
}

func (s *Server) listGraphs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	g, err := s.graphService()
	if err != nil {
		return err
	}
	list, err := g.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": list})
	return nil
}

func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, failure.Invalid("invalid_"+name, "%s must be an integer", name)
	}
	return n, nil
}

func (s *Server) graphSubgraph(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	g, err := s.graphService()
	if err != nil {
		return err
	}
	q := graph.SubgraphQuery{KBID: r.URL.Query().Get("kb_id"), NodeLabel: r.URL.Query().Get("node_label")}
	if q.MaxDepth, err = queryInt(r, "max_depth"); err != nil {
		return err
	}
	if q.MaxNodes, err = queryInt(r, "max_nodes"); err != nil {
		return err
	}
	if q.MaxEdges, err = queryInt(r, "max_edges"); err != nil {
		return err
	}
	v, err := g.Subgraph(r.Context(), subject(p), q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": v})
	return nil
}

func (s *Server) graphLabels(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	g, err := s.graphService()
	if err != nil {
		return err
	}
	labels, err := g.Labels(r.Context(), subject(p), r.URL.Query().Get("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": map[string]any{"labels": labels}})
	return nil
}

func (s *Server) graphStats(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	g, err := s.graphService()
	if err != nil {
		return err
	}
	st, err := g.Stats(r.Context(), subject(p), r.URL.Query().Get("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": st})
	return nil
}
