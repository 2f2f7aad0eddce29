package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func (s *Server) checkFirstRun(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	first, err := s.d.Auth.FirstRun(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"first_run": first})
	return nil
}

// initializeAdmin creates the first superadmin; 409 once any exists.
func (s *Server) initializeAdmin(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var in struct {
		UID      string `json:"uid"`
		Password string `json:"password"`
		Username string `json:"username"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	tok, err := s.d.Auth.Initialize(r.Context(), in.UID, in.Password, in.Username)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}

// loginForToken is the OAuth2 password flow: a form with username (uid or
// phone number) and password.
func (s *Server) loginForToken(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	if err := parseForm(w, r, s.d.MaxBodyBytes); err != nil {
		return err
	}
	tok, err := s.d.Auth.LoginFrom(r.Context(), r.PostForm.Get("username"), r.PostForm.Get("password"), s.d.ClientAddr.Addr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tok)
	return nil
}

func (s *Server) readMe(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	u, err := s.d.Auth.Me(r.Context(), p)
	if err != nil {
		return err
	}
	if s.d.Budgets == nil {
		writeJSON(w, http.StatusOK, u)
		return nil
	}
	return s.withBudget(w, r, p, u)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in auth.NewUser
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		return err
	}
	u, err := s.d.Auth.CreateUser(r.Context(), p, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	skip, limit, err := authSkipLimit(r, 100)
	if err != nil {
		return err
	}
	users, err := s.d.Auth.ListUsers(r.Context(), p, skip, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, users)
	return nil
}

// authSkipLimit reads ?skip&limit (defaults 0 and defLimit); the service
// checks the ranges.
func authSkipLimit(r *http.Request, defLimit int) (skip, limit int, err error) {
	q := r.URL.Query()
	skip, limit = 0, defLimit
	if v := q.Get("skip"); v != "" {
		if skip, err = strconv.Atoi(v); err != nil {
			return 0, 0, failure.Unprocessable("invalid_pagination", "skip must be an integer")
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			return 0, 0, failure.Unprocessable("invalid_pagination", "limit must be an integer")
		}
	}
	return skip, limit, nil
}
