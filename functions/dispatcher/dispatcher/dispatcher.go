// Package dispatcher is the handler of the dispatcher function. On
// run.finished it asks run to make sure the run's stream carries its closing
// events (run.Store.CloseStream), then asks the queue to dispatch the
// thread's next queued request — run first, queue second. On a schedule
// (sweep) it republishes unacknowledged outbox rows, prunes published ones
// past their retention window, re-drives runs whose
// worker died and ends cancel-requested runs nobody works on (run closes
// their streams), and dispatches ready queues whose run.finished event was
// lost. It does not create runs on the fast path: intake does, in its
// transaction, when a thread is idle.
//
// Every action is idempotent: duplicate and out-of-order deliveries are safe.
//
// Imported by: functions/dispatcher (main), infra/local, tests.
// May import: events, shared/*.
package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Queue dispatches a thread's next request.
type Queue interface {
	DispatchNext(ctx context.Context, uid, agentSlug, threadID string) (string, error)
	ReadyQueues(ctx context.Context, olderThan time.Duration, limit int) ([]queue.Key, error)
}

// Outbox republishes unacknowledged rows and prunes published ones past
// their retention window.
type Outbox interface {
	Sweep(ctx context.Context) (int, error)
	Prune(ctx context.Context) (int, error)
}

// Files recovers knowledge-base files whose parsing or indexing stalled.
type Files interface {
	Sweep(ctx context.Context) error
}

// Subagents is told of every finished run after its stream is closed: a
// finished sub-agent run completes the parent's tool calls waiting for it; a
// failed or cancelled parent cancels its children (shared/subagent).
type Subagents interface {
	RunFinished(ctx context.Context, r run.Run) error
	// ExpireWaits answers subagent_await calls past their timeout (sweep).
	ExpireWaits(ctx context.Context) (int, error)
}

// Budgets charges token-budget reservations whose lease ended unsettled
// (*budget.Service): a model call whose step crashed before its charge.
type Budgets interface {
	Sweep(ctx context.Context) (int, error)
}

// Config tunes the sweeps.
type Config struct {
	// Budgets, when set, also charges stale token-budget reservations.
	Budgets Budgets
	// Subagents, when set, continues parents of finished sub-agent runs.
	Subagents Subagents
	// Files, when set, also sweeps knowledge-base ingestion.
	Files Files
	Sweep run.SweepConfig
	// QueueGrace: queued requests older than this with no active run are dispatched by the sweep.
	QueueGrace time.Duration
	Crash      func(point string)
}

// Handler handles run.finished and sweep events.
type Handler struct {
	runs   *run.Store
	queue  Queue
	outbox Outbox
	cfg    Config
	log    *slog.Logger
}

// New returns the handler.
func New(runs *run.Store, q Queue, ob Outbox, cfg Config, log *slog.Logger) *Handler {
	if cfg.QueueGrace <= 0 {
		cfg.QueueGrace = 30 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &Handler{runs: runs, queue: q, outbox: ob, cfg: cfg, log: log}
}

// Register adds the handlers to a function router; a Knative PingSource tick
// counts as a sweep request.
func (h *Handler) Register(r *faas.Router) {
	faas.On(r, h.RunFinished)
	faas.On(r, h.Sweep)
	faas.OnType(r, events.TypeKnativePing, h.Sweep)
}

// RunFinished makes sure the run's stream is closed (run), then dispatches
// the thread's next request (queue): run first, queue second, never back.
func (h *Handler) RunFinished(ctx context.Context, in events.RunFinished) error {
	r, err := h.runs.CloseStream(ctx, in.RunID)
	if errors.Is(err, run.ErrNotFound) || errors.Is(err, run.ErrNotTerminal) {
		return faas.Permanent(err)
	}
	if err != nil {
		return err
	}
	if h.cfg.Subagents != nil {
		if err := h.cfg.Subagents.RunFinished(ctx, r); err != nil {
			return err // retried; the hook is idempotent
		}
	}
	if h.cfg.Crash != nil {
		h.cfg.Crash("dispatch.before_next")
	}
	_, err = h.queue.DispatchNext(ctx, r.UID, r.AgentSlug, r.ThreadID)
	return err
}

// Sweep runs the recovery sweeps once.
func (h *Handler) Sweep(ctx context.Context, _ events.SweepRequested) error {
	var errs []error
	if h.outbox != nil {
		if n, err := h.outbox.Sweep(ctx); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			h.log.Info("sweep republished outbox rows", "count", n)
		}
		if n, err := h.outbox.Prune(ctx); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			h.log.Debug("sweep pruned published outbox rows", "count", n)
		}
	}
	recs, err := h.runs.RecoverStuck(ctx, h.cfg.Sweep)
	if err != nil {
		errs = append(errs, err)
	}
	for _, rec := range recs {
		h.log.Info("sweep recovered run", "run", rec.RunID, "action", rec.Action)
	}
	if h.cfg.Subagents != nil {
		if n, err := h.cfg.Subagents.ExpireWaits(ctx); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			h.log.Info("sweep answered timed-out sub-agent waits", "count", n)
		}
	}
	if h.cfg.Files != nil {
		if err := h.cfg.Files.Sweep(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if h.cfg.Budgets != nil {
		if n, err := h.cfg.Budgets.Sweep(ctx); err != nil {
			errs = append(errs, err)
		} else if n > 0 {
			h.log.Info("sweep charged unsettled token-budget reservations", "budgets", n)
		}
	}
	ready, err := h.queue.ReadyQueues(ctx, h.cfg.QueueGrace, 100)
	if err != nil {
		errs = append(errs, err)
	}
	for _, k := range ready {
		if id, err := h.queue.DispatchNext(ctx, k.UID, k.AgentSlug, k.ThreadID); err != nil {
			errs = append(errs, err)
		} else if id != "" {
			h.log.Info("sweep dispatched a waiting request", "thread", k.ThreadID, "run", id)
		}
	}
	return errors.Join(errs...)
}

var _ Queue = (*queue.Service)(nil)
