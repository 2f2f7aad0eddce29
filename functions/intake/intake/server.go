// Package intake is the public HTTP API of the platform: auth, API keys,
// agents, threads, run submission, run and request SSE, results. It is the
// handler package of the intake function; its main adapts it to HTTP, a
// Lambda Function URL or functions-framework.
//
// Imported by: functions/intake (main), infra/local, tests.
// May import: events, shared/* and pgx.
package intake

import (
	"log/slog"
	"net/http"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

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

func (s *Server) health(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	return nil
}
