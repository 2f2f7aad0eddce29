package intake

import (
	"net/http"
	"strconv"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// authRoutes: first-run setup, password login, the caller's profile and
// user administration (/api/auth/…).
func (s *Server) authRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/auth/check-first-run", s.checkFirstRun)
	mux.HandleFunc("POST /api/auth/initialize", s.initializeAdmin)
	mux.HandleFunc("POST /api/auth/token", s.loginForToken)
	mux.HandleFunc("GET /api/auth/me", s.user(s.readMe))
	mux.HandleFunc("POST /api/auth/users", s.admin(s.createUser))
	mux.HandleFunc("GET /api/auth/users", s.admin(s.listUsers))
}

func (s *Server) checkFirstRun(w http.ResponseWriter, r *http.Request) {
	first, err := s.d.Auth.FirstRun(r.Context())
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"first_run": first})
}

// initializeAdmin creates the first superadmin; 409 once any exists.
func (s *Server) initializeAdmin(w http.ResponseWriter, r *http.Request) {
	var in struct {
		UID      string `json:"uid"`
		Password string `json:"password"`
		Username string `json:"username"`
	}
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	tok, err := s.d.Auth.Initialize(r.Context(), in.UID, in.Password, in.Username)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, tok)
}

// loginForToken is the OAuth2 password flow: a form with username (uid or
// phone number) and password.
func (s *Server) loginForToken(w http.ResponseWriter, r *http.Request) {
	if err := parseForm(w, r, s.d.MaxBodyBytes); err != nil {
		writeError(w, s.log, err)
		return
	}
	tok, err := s.d.Auth.Login(r.Context(), r.PostForm.Get("username"), r.PostForm.Get("password"))
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, tok)
}

func (s *Server) readMe(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	u, err := s.d.Auth.Me(r.Context(), p)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var in auth.NewUser
	if err := decodeJSON(w, r, s.d.MaxBodyBytes, &in); err != nil {
		writeError(w, s.log, err)
		return
	}
	u, err := s.d.Auth.CreateUser(r.Context(), p, in)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	skip, limit, err := authSkipLimit(r, 100)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	users, err := s.d.Auth.ListUsers(r.Context(), p, skip, limit)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, users)
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
