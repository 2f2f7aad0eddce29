package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kbassist"
)

// kbAssistRoutes: the rest of the original's knowledge_router — statistics
// and their repair, export, sample questions and description writing
// (shared/kbassist), imports by URL and from the workspace
// (shared/kbimport) and the graph build's reconcile. Admin role, then the
// knowledge base's permission as the original (the two imports name the
// knowledge base in the body: KBInBody).
func (s *Server) kbAssistRoutes() []Route {
	return []Route{
		{"GET", "/api/knowledge/stats", Admin, NoCheck, s.kbStatistics}, // counts only the KBs the caller reads
		{"POST", "/api/knowledge/databases/{kb_id}/stats/repair", Admin, ManageKB, s.kbRepairStats},
		{"GET", "/api/knowledge/databases/{kb_id}/export", Admin, ReadKB, s.kbExport},
		{"POST", "/api/knowledge/databases/{kb_id}/sample-questions", Admin, ManageKB, s.kbGenerateQuestions},
		{"GET", "/api/knowledge/databases/{kb_id}/sample-questions", Admin, ReadKB, s.kbGetQuestions},
		{"POST", "/api/knowledge/generate-description", Admin, NoCheck, s.kbGenerateDescription}, // reads no stored data
		{"POST", "/api/knowledge/files/fetch-url", Admin, KBInBody, s.kbFetchURL},
		{"POST", "/api/knowledge/files/import-workspace", Admin, KBInBody, s.kbImportWorkspace},
		{"POST", "/api/knowledge/databases/{kb_id}/graph-build/reconcile", Admin, ManageKB, s.graphBuildReconcile},
	}
}

func (s *Server) kbStatistics(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	st, err := s.d.KBs.Statistics(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "stats": st})
	return nil
}

func (s *Server) kbRepairStats(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	res, err := s.kb.RepairStats(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) kbExport(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	vectors := false
	if v := q.Get("include_vectors"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return failure.Unprocessable("invalid_query", "include_vectors must be true or false")
		}
		vectors = b
	}
	ex, err := s.kb.Export(r.Context(), subject(p), r.PathValue("kb_id"), q.Get("format"), vectors)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", ex.ContentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+ex.Filename+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	return ex.Write(w)
}

func (s *Server) assist() (*kbassist.Service, error) {
	if s.d.Assist == nil {
		return nil, failure.New(failure.KindUnavailable, "assist_unavailable", "model helpers are not configured")
	}
	return s.d.Assist, nil
}

func (s *Server) kbGenerateQuestions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	a, err := s.assist()
	if err != nil {
		return err
	}
	var in struct {
		Count int `json:"count"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	q, err := a.GenerateQuestions(r.Context(), subject(p), r.PathValue("kb_id"), in.Count)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "questions": q.Questions, "count": q.Count, "kb_id": q.KBID})
	return nil
}

func (s *Server) kbGetQuestions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	a, err := s.assist()
	if err != nil {
		return err
	}
	q, err := a.GetQuestions(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "questions": q.Questions, "count": q.Count, "kb_id": q.KBID,
		"updated_at": q.UpdatedAt})
	return nil
}

func (s *Server) kbGenerateDescription(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	a, err := s.assist()
	if err != nil {
		return err
	}
	var in kbassist.DescriptionInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	d, err := a.GenerateDescription(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "description": d})
	return nil
}

func (s *Server) kbFetchURL(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		URL  string `json:"url"`
		KBID string `json:"kb_id"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	f, err := s.imports.FetchURL(r.Context(), subject(p), in.KBID, in.URL)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "file_path": f.Key, "object_name": f.Key,
		"content_hash": f.ContentHash, "filename": f.Filename, "original_filename": f.OriginalFilename, "url": f.URL,
		"final_url": f.FinalURL, "size": f.Size, "same_name_files": f.SameNameFiles, "has_same_name": len(f.SameNameFiles) > 0})
	return nil
}

func (s *Server) kbImportWorkspace(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		KBID  string   `json:"kb_id"`
		Paths []string `json:"paths"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	got, err := s.imports.ImportWorkspace(r.Context(), subject(p), in.KBID, in.Paths)
	if err != nil {
		return err
	}
	items := make([]map[string]any, len(got))
	for i, f := range got {
		items[i] = map[string]any{"message": "Workspace file successfully imported", "file_path": f.Key, "object_name": f.Key,
			"kb_id": in.KBID, "content_hash": f.ContentHash, "filename": f.Filename, "original_filename": f.OriginalFilename,
			"size": f.Size, "workspace_path": f.WorkspacePath, "same_name_files": f.SameNameFiles, "has_same_name": len(f.SameNameFiles) > 0}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "items": items})
	return nil
}

func (s *Server) graphBuildReconcile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := s.graphBuilder()
	if err != nil {
		return err
	}
	var in struct {
		Mode string `json:"mode"`
	}
	if r.ContentLength != 0 { // the body is optional, as the original's
		if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
			return err
		}
	}
	res, err := b.Reconcile(r.Context(), subject(p), r.PathValue("kb_id"), in.Mode)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "graph reconcile queued", "status": res.Status,
		"mode": res.Mode, "data": res})
	return nil
}
