// Package evaluate is the handler of the evaluate function: it runs RAG
// evaluation runs one checkpointed batch per io.yuxi.evaluation.batch.ready.v1
// event (shared/evaluation commits each batch with the next batch's event;
// a redelivered batch is a no-op), generates benchmark datasets one batch per
// io.yuxi.evaluation.dataset.batch.ready.v1, and starts scheduled
// evaluations on scheduler ticks (io.yuxi.evaluation.tick.v1, or a Knative
// PingSource's dev.knative.sources.ping carrying the same data).
//
// Imported by: functions/evaluate (main), infra/local, tests.
// May import: events, shared/* (not pgx: shared/evaluation owns the tables).
package evaluate

import (
	"context"
	"log/slog"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Evaluator is the evaluation use cases the handler drives (evaluation.Service).
type Evaluator interface {
	EvaluateBatch(ctx context.Context, runID string, batch int) error
	GenerateBatch(ctx context.Context, datasetID string, batch int) error
	Tick(ctx context.Context, at time.Time) ([]string, error)
	NotifyRegression(ctx context.Context, ev events.EvaluationRegressed) error
}

// Config tunes the handler.
type Config struct {
	// Now is the clock of ticks without a time (default time.Now).
	Now func() time.Time
	// Crash is called at named crash points (tests).
	Crash func(point string)
}

// Handler handles the evaluate function's events.
type Handler struct {
	ev  Evaluator
	cfg Config
	log *slog.Logger
}

// New returns the handler.
func New(ev Evaluator, cfg Config, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{ev: ev, cfg: cfg, log: log}
}

// Register adds the handler to a function router.
func (h *Handler) Register(r *faas.Router) {
	faas.On(r, h.Batch)
	faas.On(r, h.DatasetBatch)
	faas.On(r, h.Tick)
	// A Knative PingSource sinking straight to this Service (not through the
	// Broker, whose ping Trigger goes to the dispatcher) carries tick data.
	faas.OnType(r, events.TypeKnativePing, h.Tick)
	faas.On(r, h.Regressed)
}

// Batch evaluates one batch of a run. A coded failure that could not even
// be recorded on the run is permanent; anything else is retried.
func (h *Handler) Batch(ctx context.Context, in events.EvaluationBatchReady) error {
	if h.cfg.Crash != nil {
		h.cfg.Crash("evaluate.batch")
	}
	err := h.ev.EvaluateBatch(ctx, in.RunID, in.Batch)
	if _, coded := failure.As(err); coded {
		return faas.Permanent(err)
	}
	return err
}

// DatasetBatch generates one batch of a benchmark dataset.
func (h *Handler) DatasetBatch(ctx context.Context, in events.DatasetBatchReady) error {
	err := h.ev.GenerateBatch(ctx, in.DatasetID, in.Batch)
	if _, coded := failure.As(err); coded {
		return faas.Permanent(err)
	}
	return err
}

// Tick starts the scheduled evaluations due at the tick's time (its own
// clock when the tick has none), each once however many instances receive
// ticks of the same minute.
func (h *Handler) Tick(ctx context.Context, in events.EvaluationTick) error {
	at := h.cfg.Now()
	if in.Time != "" {
		t, err := time.Parse(time.RFC3339, in.Time)
		if err != nil {
			return faas.Permanent(err)
		}
		at = t
	}
	runs, err := h.ev.Tick(ctx, at)
	if len(runs) > 0 {
		h.log.Info("scheduled evaluations started", "runs", runs, "at", at)
	}
	return err
}

// Regressed reports a gated run that regressed and posts it to its
// schedule's webhook, if any (through the SSRF-guarded client; a refused
// or denied webhook is final, a network error or 5xx is retried).
func (h *Handler) Regressed(ctx context.Context, in events.EvaluationRegressed) error {
	h.log.Warn("evaluation regressed", "run", in.RunID, "schedule", in.ScheduleID, "kb", in.KBID, "suite", in.SuiteID, "metric", in.Metric,
		"value", in.Value, "baseline", in.Baseline, "baseline_run", in.BaselineRunID, "tolerance", in.Tolerance)
	err := h.ev.NotifyRegression(ctx, in)
	if _, coded := failure.As(err); coded {
		h.log.Warn("regression webhook", "run", in.RunID, "error", err)
		return faas.Permanent(err)
	}
	return err
}
