package intake

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/auth"
)

// Deps are the intake's collaborators, built by main.
type Deps struct {
	Pool *pgxpool.Pool
	Auth *auth.Service
	Log  *slog.Logger
	// MaxBodyBytes bounds every request body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64
}
