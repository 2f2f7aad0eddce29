package intake

import (
	"encoding/json"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// Retrieval from a KB, and its retrieval parameters.

// queryKB answers {result, status:"success"} as the original.
func (s *Server) queryKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	res, err := s.query(w, r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res, "status": "success"})
	return nil
}

// queryTest answers the raw result list.
func (s *Server) queryTest(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	res, err := s.query(w, r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// query decodes a query and runs it on {kb_id}: the part both query routes share.
func (s *Server) query(w http.ResponseWriter, r *http.Request, p auth.Principal) ([]kb.Result, error) {
	var in kb.QueryInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return nil, err
	}
	return s.kb.Query(r.Context(), subject(p), r.PathValue("kb_id"), in)
}

func (s *Server) getQueryParams(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	k, err := s.kb.KB(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"options": kb.ParamOptions(k.Retrieval()), "values": k.Retrieval()})
	return nil
}

// putQueryParams takes the parameters bare or as {options: …}.
func (s *Server) putQueryParams(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in json.RawMessage
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	var wrapped struct {
		Options json.RawMessage `json:"options"`
	}
	if json.Unmarshal(in, &wrapped) == nil && len(wrapped.Options) > 0 {
		in = wrapped.Options
	}
	ret, err := s.d.KBs.SetRetrieval(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"options": kb.ParamOptions(ret), "values": ret})
	return nil
}
