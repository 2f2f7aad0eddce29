// Package intake is the public HTTP API of the platform: auth, API keys,
// agents, threads, run submission, run and request SSE, results. It is the
// handler package of the intake function; its main adapts it to HTTP, a
// Lambda Function URL or functions-framework.
//
// Imported by: functions/intake (main), infra/local, tests.
// May import: events and shared/*.
package intake

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Authenticator turns an Authorization header into a principal.
type Authenticator interface {
	Authenticate(ctx context.Context, authorization string) (auth.Principal, error)
}

// Server is the HTTP API.
type Server struct {
	d   Deps
	log *slog.Logger
}

// New returns the API server. Every dependency is built by main and passed in.
func New(d Deps) *Server {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.MaxBodyBytes <= 0 {
		d.MaxBodyBytes = 1 << 20
	}
	return &Server{d: d, log: d.Log}
}

// Handler returns the routed API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/system/health", s.health)
	s.authRoutes(mux)
	s.apiKeyRoutes(mux)
	s.agentRoutes(mux)
	s.threadRoutes(mux)
	s.runRoutes(mux)
	s.knowledgeRoutes(mux)
	ext := http.NewServeMux()
	s.externalKBRoutes(ext)
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, s.log, failure.NotFound("route_not_found", "no route %s %s", r.Method, r.URL.Path))
	}
	mux.HandleFunc("/api/", notFound)
	ext.HandleFunc("/", notFound)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, externalPrefix) {
			ext.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// userHandler is a route that needs an authenticated user.
type userHandler func(w http.ResponseWriter, r *http.Request, p auth.Principal)

// user wraps h so that it runs only for an authenticated caller (401 otherwise).
func (s *Server) user(h userHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.d.Auth.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			writeError(w, s.log, err)
			return
		}
		h(w, r, p)
	}
}

// admin wraps h so that it runs only for admins and superadmins (403 otherwise).
func (s *Server) admin(h userHandler) http.HandlerFunc {
	return s.user(func(w http.ResponseWriter, r *http.Request, p auth.Principal) {
		if !p.IsAdmin() {
			writeError(w, s.log, failure.Forbidden("admin_required", "this action needs the admin role"))
			return
		}
		h(w, r, p)
	})
}
