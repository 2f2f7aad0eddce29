package intake

import (
	"net"
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Users (auth_router): admins manage the users of their department, the
// superadmin everyone's; every user edits their own profile and avatar.

func userID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("user_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, auth.ErrUserNotFound
	}
	return id, nil
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := userID(r)
	if err != nil {
		return err
	}
	u, err := s.d.Auth.GetUser(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) updateUser(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := userID(r)
	if err != nil {
		return err
	}
	var in auth.UserUpdate
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	u, err := s.d.Auth.UpdateUser(r.Context(), p, id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := userID(r)
	if err != nil {
		return err
	}
	if err := s.d.Auth.DeleteUser(r.Context(), p, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "user deleted"})
	return nil
}

func (s *Server) userAccessOptions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	skip, limit, err := authSkipLimit(r, 1000)
	if err != nil {
		return err
	}
	opts, err := s.d.Auth.AccessOptions(r.Context(), p, skip, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, opts)
	return nil
}

func (s *Server) validateUsername(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in struct {
		Username string `json:"username"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	out, err := s.d.Auth.ValidateUsername(r.Context(), in.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) checkUID(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	uid := r.PathValue("uid")
	free, err := s.d.Auth.CheckUID(r.Context(), uid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"uid": uid, "is_available": free})
	return nil
}

func (s *Server) updateProfile(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in auth.ProfileUpdate
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	u, err := s.d.Auth.UpdateProfile(r.Context(), p, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

// uploadAvatar stores the image (type from its bytes, ≤ 5 MB) and makes it
// the caller's avatar.
func (s *Server) uploadAvatar(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	url, err := s.saveImage(w, r, "avatar")
	if err != nil {
		return err
	}
	if err := s.d.Auth.SetAvatar(r.Context(), p, url); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "avatar_url": url, "message": "avatar uploaded"})
	return nil
}

// impersonate gives the superadmin a short-lived token acting as another
// user; the token's "act" claim names the superadmin, and the impersonation
// is recorded with the client's address.
func (s *Server) impersonate(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := userID(r)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	tok, err := s.d.Auth.Impersonate(r.Context(), p, id, host)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}

// errNoSettings answers the user-settings routes of a server built without them.
var errNoSettings = failure.New(failure.KindUnavailable, "settings_unavailable", "user settings are not available here")
