package intake

import (
	"context"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// The knowledge bases themselves: list, create, read, change, delete, the
// KB types and chunk presets, and a KB's status stream.

func (s *Server) listKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": list})
	return nil
}

func (s *Server) accessibleKBs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	list, err := s.d.KBs.List(r.Context(), subject(p))
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(list))
	for _, k := range list {
		out = append(out, map[string]any{"kb_id": k.KBID, "db_id": k.KBID, "name": k.Name, "description": k.Description, "kb_type": k.KBType, "permission": k.Permission})
	}
	writeJSON(w, http.StatusOK, map[string]any{"databases": out})
	return nil
}

func (s *Server) createKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.CreateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	k, err := s.d.KBs.Create(r.Context(), subject(p), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (s *Server) getKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	k, err := s.kb.KB(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (s *Server) updateKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in kb.UpdateInput
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	k, err := s.d.KBs.Update(r.Context(), subject(p), r.PathValue("kb_id"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

// deleteKB removes the KB's rows and keyword index, then its vectors and objects.
func (s *Server) deleteKB(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	k, err := s.kb.DeleteKB(r.Context(), subject(p), r.PathValue("kb_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true, "kb_id": k.KBID})
	return nil
}

func (s *Server) kbTypes(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"kb_types": kb.Types()})
	return nil
}

func (s *Server) chunkPresets(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	out := []map[string]string{}
	for _, pr := range chunk.Presets() {
		out = append(out, map[string]string{"value": pr.ID, "label": pr.Label, "description": pr.Description})
	}
	writeJSON(w, http.StatusOK, map[string]any{"presets": out, "default": "general"})
	return nil
}

// kbEvents streams the KB's file status changes (SSE, event file_status),
// new ones unless the client resumes (Last-Event-ID or ?after_seq). Access
// is checked again before each batch of notices: once the caller may no
// longer read the KB (share revoked, KB deleted) the stream closes without
// telling them more, and a reconnect gets 404.
func (s *Server) kbEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	kbID := r.PathValue("kb_id")
	if _, err := s.kb.KB(r.Context(), subject(p), kbID); err != nil {
		return err
	}
	cursor := runstream.RunCursor(r)
	if r.Header.Get("Last-Event-ID") == "" && r.URL.Query().Get("after_seq") == "" {
		cursor = runstream.CursorNew
	}
	_ = runstream.ServeStream(w, r, s.d.Hub, s.d.Hub.KBKey(kbID), cursor,
		runstream.StreamOptions{Heartbeat: s.d.SSEHeartbeat, MaxDuration: s.d.SSEMaxDuration},
		runstream.StreamHooks{Entries: func(ctx context.Context, sw *runstream.EventWriter, batch []runstream.Entry) (bool, error) {
			if _, err := s.kb.KB(ctx, subject(p), kbID); err != nil {
				return true, nil
			}
			for _, e := range batch {
				sw.Event(e.Event, e.ID, e.Data)
			}
			return false, nil
		}})
	return nil
}
