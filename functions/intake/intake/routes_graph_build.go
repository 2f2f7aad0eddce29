package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
)

// The graph-build routes of the original's knowledge_router: the
// extractor configuration of a knowledge base (changing its model or schema
// warns and resets the graph), build status, failed-chunk samples, a
// (re)build of the indexed files and a reset. Extraction itself runs in
// kb-graph on io.yuxi.document.indexed.v1.

func (s *Server) graphBuilder() (*graph.Builder, error) {
	if s.graphBuild == nil {
		return nil, failure.NotFound("graph_unavailable", "the knowledge graph is not configured")
	}
	return s.graphBuild, nil
}

func (s *Server) graphBuildStatus(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	st, err := b.Status(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": st})
	return nil
}

func (s *Server) graphBuildGetConfig(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	c, err := b.GetConfig(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": c})
	return nil
}

func (s *Server) graphBuildConfigure(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	var in graph.ConfigInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	res, err := b.Configure(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": res})
	return nil
}

func (s *Server) graphBuildIndex(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	n, err := b.Index(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": map[string]any{"queued": n}})
	return nil
}

func (s *Server) graphBuildFailedChunks(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	list, err := b.FailedChunks(r.Context(), subject(p), r.PathValue("kb_id"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": list})
	return nil
}

func (s *Server) graphBuildReset(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	if err := b.Reset(r.Context(), subject(p), r.PathValue("kb_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": map[string]any{"reset": true}})
	return nil
}
