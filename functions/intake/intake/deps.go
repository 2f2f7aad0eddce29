package intake

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Deps are the intake's collaborators, built by main.
type Deps struct {
	Pool    *pgxpool.Pool
	Auth    *auth.Service
	Agents  *agent.Store
	Threads *thread.Store
	Queue   *queue.Service
	Runs    *run.Store
	Tools   *tool.Registry
	// Hub serves run and request streams; Stream writes cancel signals and end events.
	Hub    *runstream.Hub
	Stream *runstream.Writer
	Log    *slog.Logger
	// MaxBodyBytes bounds every request body (default 1 MiB); larger bodies get 413.
	MaxBodyBytes int64
	// SSEHeartbeat and SSEMaxDuration tune the event streams (defaults 15s and 30 min).
	SSEHeartbeat   time.Duration
	SSEMaxDuration time.Duration
}
