package intake

import (
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/mindmap"
)

// mindmapRoutes: the mind-map routes of the original's knowledge_router
// (shared/mindmap): admin, and read access to the knowledge base to read
// its mind map, manage access to generate it.
func (s *Server) mindmapRoutes() []Route {
	return []Route{
		{"GET", "/api/knowledge/mindmap/databases", Admin, NoCheck, s.mindmapDatabases},
		{"GET", "/api/knowledge/databases/{kb_id}/mindmap/files", Admin, ReadKB, s.mindmapFiles},
		{"POST", "/api/knowledge/databases/{kb_id}/mindmap/generate", Admin, ManageKB, s.mindmapGenerate},
		{"GET", "/api/knowledge/databases/{kb_id}/mindmap", Admin, ReadKB, s.mindmapGet},
		{"GET", "/api/knowledge/databases/{kb_id}/mindmap/diff", Admin, ReadKB, s.mindmapDiff},
	}
}

func (s *Server) mindmapService() (*mindmap.Service, error) {
	if s.d.Mindmaps == nil {
		return nil, failure.New(failure.KindUnavailable, "mindmap_unavailable", "mind maps are not configured")
	}
	return s.d.Mindmaps, nil
}

func (s *Server) mindmapDatabases(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	m, err := s.mindmapService()
	if err != nil {
		return err
	}
	list, err := m.Databases(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "databases": list, "total": len(list)})
	return nil
}

func (s *Server) mindmapFiles(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	m, err := s.mindmapService()
	if err != nil {
		return err
	}
	fs, err := m.FileList(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "db_id": r.PathValue("kb_id"), "files": fs, "total": len(fs)})
	return nil
}

func (s *Server) mindmapGenerate(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	m, err := s.mindmapService()
	if err != nil {
		return err
	}
	var in mindmap.GenerateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	if r.URL.Query().Get("incremental") == "true" {
		in.Incremental = true
	}
	mm, err := m.Generate(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "mindmap": mm.Mindmap, "file_ids": mm.FileIDs, "metadata": mm.Metadata})
	return nil
}

func (s *Server) mindmapGet(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	m, err := s.mindmapService()
	if err != nil {
		return err
	}
	mm, err := m.Get(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	if mm == nil {
		writeJSON(w, http.StatusOK, map[string]any{"message": "success", "mindmap": nil})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "mindmap": mm.Mindmap, "file_ids": mm.FileIDs,
		"metadata": mm.Metadata, "updated_at": mm.UpdatedAt})
	return nil
}

func (s *Server) mindmapDiff(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	m, err := s.mindmapService()
	if err != nil {
		return err
	}
	d, err := m.Diff(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "data": d})
	return nil
}
