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

func (s *Server) listAPIKeys(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	skip, limit, err := authSkipLimit(r, 100)
	if err != nil {
		return err
	}
	keys, total, err := s.d.Auth.ListAPIKeys(r.Context(), p, skip, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_keys": keys, "total": total})
	return nil
}

// createAPIKey is idempotent on request_id: a replay answers the same key
// and secret.
func (s *Server) createAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in struct {
		RequestID    string  `json:"request_id"`
		Name         string  `json:"name"`
		UserID       *int64  `json:"user_id"`
		DepartmentID *int64  `json:"department_id"`
		ExpiresAt    *string `json:"expires_at"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	req := auth.NewAPIKey{RequestID: in.RequestID, Name: in.Name, UserID: in.UserID, DepartmentID: in.DepartmentID}
	if in.ExpiresAt != nil && strings.TrimSpace(*in.ExpiresAt) != "" {
		t, err := parseAPIKeyTime(*in.ExpiresAt)
		if err != nil {
			return err
		}
		req.ExpiresAt = &t
	}
	created, err := s.d.Auth.CreateAPIKey(r.Context(), p, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, created)
	return nil
}

func (s *Server) getAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := apiKeyPathID(r)
	if err != nil {
		return err
	}
	k, err := s.d.Auth.GetAPIKey(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_key": k})
	return nil
}

// updateAPIKey changes name, expires_at (null or "" clears it) and is_enabled;
// absent fields are unchanged.
func (s *Server) updateAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := apiKeyPathID(r)
	if err != nil {
		return err
	}
	var in struct {
		Name      *string         `json:"name"`
		ExpiresAt json.RawMessage `json:"expires_at"`
		IsEnabled *bool           `json:"is_enabled"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	upd := auth.APIKeyUpdate{Name: in.Name, IsEnabled: in.IsEnabled}
	if raw := bytes.TrimSpace(in.ExpiresAt); len(raw) > 0 {
		var str *string
		if err := json.Unmarshal(raw, &str); err != nil {
			return failure.Unprocessable("invalid_expires_at", "expires_at must be a timestamp string or null")
		}
		if str == nil || strings.TrimSpace(*str) == "" {
			upd.ClearExpiry = true
		} else {
			t, err := parseAPIKeyTime(*str)
			if err != nil {
				return err
			}
			upd.ExpiresAt = &t
		}
	}
	k, err := s.d.Auth.UpdateAPIKey(r.Context(), p, id, upd)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"api_key": k})
	return nil
}

// deleteAPIKey revokes: the row stays as a tombstone.
func (s *Server) deleteAPIKey(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := apiKeyPathID(r)
	if err != nil {
		return err
	}
	if err := s.d.Auth.RevokeAPIKey(r.Context(), p, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
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
