package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// The CLI's routes (…/databases/external…): any user reads the KBs shared
// with them — list, files, retrieval, and a parsed document's lines.

func (s *Server) externalKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(list))
	for _, k := range list {
		out = append(out, map[string]any{"kb_id": k.KBID, "name": k.Name, "description": k.Description, "kb_type": k.KBType, "supports_documents": k.SupportsDocuments})
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": out})
	return nil
}

func (s *Server) externalFiles(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	in, err := listInput(r)
	if err != nil {
		return err
	}
	in.AllLevels = in.Query != ""
	return s.writeFileList(w, r, p, in)
}

func (s *Server) externalRetrieve(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.QueryInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	kbID := r.PathValue("kb_id")
	res, err := s.kb.Query(r.Context(), subject(p), kbID, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, kb.SearchOutput(kbID, res))
	return nil
}

// externalOpen answers ?limit lines (default 200, at most 1800) from ?offset.
func (s *Server) externalOpen(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit := 200
	if v := q.Get("limit"); v != "" {
		var err error
		if limit, err = strconv.Atoi(v); err != nil {
			limit = 0 // refused by Open, after its access check
		}
	}
	win, err := s.kb.Open(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("file_id"), offset, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, win)
	return nil
}

func (s *Server) externalFind(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.FindOptions
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	res, err := s.kb.Find(r.Context(), subject(p), r.PathValue("kb_id"), r.PathValue("file_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
