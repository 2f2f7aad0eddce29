package intake

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// apiKeyRoutes: the caller's API keys (/api/user/apikey/…). Paths are
// accepted with and without the trailing slash. Someone else's key is 404.
func (s *Server) apiKeyRoutes(mux *http.ServeMux) {
	for _, p := range []string{"/api/user/apikey", "/api/user/apikey/{$}"} {
		mux.HandleFunc("GET "+p, s.user(s.listAPIKeys))
		mux.HandleFunc("POST "+p, s.user(s.createAPIKey))
	}
	mux.HandleFunc("GET /api/user/apikey/{api_key_id}", s.user(s.getAPIKey))
	mux.HandleFunc("PUT /api/user/apikey/{api_key_id}", s.user(s.updateAPIKey))
	mux.HandleFunc("DELETE /api/user/apikey/{api_key_id}", s.user(s.deleteAPIKey))
}

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	skip, limit, err := authSkipLimit(r, 100)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	keys, total, err := s.d.Auth.ListAPIKeys(r.Context(), p, skip, limit)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_keys": keys, "total": total})
}

// createAPIKey is idempotent on request_id: a replay answers the same key
// and secret.
func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var in struct {
		RequestID    string  `json:"request_id"`
		Name         string  `json:"name"`
		UserID       *int64  `json:"user_id"`
		DepartmentID *int64  `json:"department_id"`
		ExpiresAt    *string `json:"expires_at"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	req := auth.NewAPIKey{RequestID: in.RequestID, Name: in.Name, UserID: in.UserID, DepartmentID: in.DepartmentID}
	if in.ExpiresAt != nil && strings.TrimSpace(*in.ExpiresAt) != "" {
		t, err := parseAPIKeyTime(*in.ExpiresAt)
		if err != nil {
			writeError(w, s.log, err)
			return
		}
		req.ExpiresAt = &t
	}
	created, err := s.d.Auth.CreateAPIKey(r.Context(), p, req)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, created)
}

func (s *Server) getAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := apiKeyPathID(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	k, err := s.d.Auth.GetAPIKey(r.Context(), p, id)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_key": k})
}

// updateAPIKey changes name, expires_at (null or "" clears it) and is_enabled;
// absent fields are unchanged.
func (s *Server) updateAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := apiKeyPathID(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	var in struct {
		Name      *string         `json:"name"`
		ExpiresAt json.RawMessage `json:"expires_at"`
		IsEnabled *bool           `json:"is_enabled"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	upd := auth.APIKeyUpdate{Name: in.Name, IsEnabled: in.IsEnabled}
	if raw := bytes.TrimSpace(in.ExpiresAt); len(raw) > 0 {
		var str *string
		if err := json.Unmarshal(raw, &str); err != nil {
			writeError(w, s.log, failure.Unprocessable("invalid_expires_at", "expires_at must be a timestamp string or null"))
			return
		}
		if str == nil || strings.TrimSpace(*str) == "" {
			upd.ClearExpiry = true
		} else {
			t, err := parseAPIKeyTime(*str)
			if err != nil {
				writeError(w, s.log, err)
				return
			}
			upd.ExpiresAt = &t
		}
	}
	k, err := s.d.Auth.UpdateAPIKey(r.Context(), p, id, upd)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_key": k})
}

// deleteAPIKey revokes: the row stays as a tombstone.
func (s *Server) deleteAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := apiKeyPathID(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	if err := s.d.Auth.RevokeAPIKey(r.Context(), p, id); err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
}

// apiKeyPathID: an id that is not a positive integer names no key (404).
func apiKeyPathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("api_key_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, auth.ErrAPIKeyNotFound
	}
	return id, nil
}

// parseAPIKeyTime accepts RFC 3339 and, like the original product, naive
// timestamps, which are UTC.
func parseAPIKeyTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, failure.Unprocessable("invalid_expires_at", "expires_at %q is not an ISO 8601 timestamp", s)
}
