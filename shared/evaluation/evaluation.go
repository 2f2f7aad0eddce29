// Package evaluation is the RAG evaluation domain: benchmark datasets of a
// knowledge base (uploaded as JSONL or generated from the KB by a model),
// evaluation runs that retrieve every item's query from the KB and score the
// result (recall@k, f1@k, document-level nDCG@10, answers judged by a model)
// and their per-item results. It owns the evaluation_* tables.
//
// A run is a sequence of checkpointed batches driven by events through the
// outbox (io.yuxi.evaluation.batch.ready.v1): each batch's items are
// evaluated with bounded concurrency outside any transaction, then the
// batch's results, the run's progress and the next batch's event commit in
// one transaction guarded by the run's next_batch. A redelivered or raced
// batch finds next_batch moved on and is a no-op; a crashed one is
// redelivered (the outbox sweep) and redone from the last committed batch.
// Model calls are at-least-once.
//
// Every use case checks the caller's access to the dataset's or run's
// knowledge base (shared/kb): reads need read access, changes manage access;
// a KB the caller cannot read is indistinguishable from a missing one.
//
// Agent evaluation suites (suites.go, suiteruns.go) run their items through
// the normal run path (shared/invoke, source agent_evaluation) in the same
// checkpointed batches, driven by the same event (a suite run's id starts
// with srun_); their schedules, gates and history share the RAG runs'.
//
// Imported by: functions/intake (routes), shared/bootstrap/knowledge (which
// builds it for the mains of intake and evaluate, and infra/local), tests.
// May import: events, shared/access, shared/failure, shared/invoke,
// shared/kb, shared/llm, shared/netguard, shared/outbox, shared/postgres,
// shared/retrievaleval, pgx, robfig/cron (the schedules' cron parser), the
// json schema validator (json_schema checks).
package evaluation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Errors.
var (
	ErrDatasetNotFound = failure.NotFound("dataset_not_found", "evaluation dataset not found")
	ErrRunNotFound     = failure.NotFound("evaluation_run_not_found", "evaluation run not found")
	ErrDatasetNotReady = failure.Invalid("dataset_not_ready", "the dataset is not ready (still being generated, or its generation failed)")
)

// KBs reads knowledge bases with the caller's access (kb.Store).
type KBs interface {
	Get(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	GetManaged(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	Load(ctx context.Context, kbID string) (kb.KB, error)
	// LoadSettings is Load without the KB's file count, for runs and ticks.
	LoadSettings(ctx context.Context, kbID string) (kb.KB, error)
	SampleChunks(ctx context.Context, kbID, seed string, offset, n int) ([]kb.SampledChunk, int, error)
}

// Retriever queries a knowledge base (kb.Retriever).
type Retriever interface {
	Query(ctx context.Context, k kb.KB, query string, opt kb.Retrieval, fileName string) ([]kb.Result, error)
}

// Outbox runs a transaction whose events are published after commit (outbox.Outbox).
type Outbox interface {
	Tx(ctx context.Context, pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}, fn func(tx pgx.Tx, emit outbox.Emit) error) error
	// TxRows is Tx returning the committed rows unpublished (a chain of
	// batches keeps the next batch's event); Publish hands rows to the relay.
	TxRows(ctx context.Context, pool interface {
		Begin(context.Context) (pgx.Tx, error)
	}, fn func(tx pgx.Tx, emit outbox.Emit) error) ([]outbox.Row, error)
	Publish(ctx context.Context, rows []outbox.Row)
	// InsertCTE renders an event's insert as a CTE of the caller's own
	// statement (a run started in one round trip).
	InsertCTE(ctx context.Context, p outbox.Pending, name, guard string, first int) (outbox.CTE, error)
}

// Config tunes runs.
type Config struct {
	// BatchSize is the number of items a run commits at once (default 10):
	// the unit of progress and of redone work after a crash.
	BatchSize int
	// Concurrency bounds the items of a run evaluated at once (default 4).
	Concurrency int
	// ChainFor is how long one delivery of a RAG run's batch event goes on
	// with the following batches itself (default 10s; a batch slower than
	// 5s also ends the chain); a negative value: one batch per delivery.
	ChainFor time.Duration
	// Crash is called at named crash points (tests): evaluate.batch_evaluated
	// (a batch's items evaluated, nothing committed) and
	// evaluate.batch_committed (committed; its next event handed to the
	// relay, perhaps not delivered).
	Crash func(point string)
}

// Deps are a Service's collaborators. Pool, Outbox and KBs are required;
// the API side needs no Retriever or Models (only the evaluate function
// evaluates).
type Deps struct {
	Pool      *pgxpool.Pool
	Outbox    Outbox
	KBs       KBs
	Retriever Retriever
	Models    Models
	Config    Config
	Log       *slog.Logger
	// Agents runs agent evaluation samples (set later with WithAgents where
	// the run path is built after the service).
	Agents Agents
	// Langfuse reads suite items from Langfuse datasets and writes results
	// back as experiments (nil: LANGFUSE_* not configured).
	Langfuse Langfuse
	// Outbound is the SSRF-guarded client of regression webhooks.
	Outbound *netguard.Guard
}

// Service is the evaluation use cases.
type Service struct {
	pool     *pgxpool.Pool
	ob       Outbox
	kbs      KBs
	ret      Retriever
	models   Models
	cfg      Config
	log      *slog.Logger
	agents   Agents
	langfuse Langfuse
	guard    *netguard.Guard
	crons    *cronCache
}

// New returns the use cases over d.
func New(d Deps) *Service {
	if d.Config.BatchSize <= 0 {
		d.Config.BatchSize = 10
	}
	if d.Config.Concurrency <= 0 {
		d.Config.Concurrency = 4
	}
	if d.Config.ChainFor == 0 {
		d.Config.ChainFor = 10 * time.Second
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{pool: d.Pool, ob: d.Outbox, kbs: d.KBs, ret: d.Retriever, models: d.Models, cfg: d.Config, log: d.Log,
		agents: d.Agents, langfuse: d.Langfuse, guard: d.Outbound, crons: &cronCache{}}
}

func (s *Service) crash(point string) {
	if s.cfg.Crash != nil {
		s.cfg.Crash(point)
	}
}

func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Langfuse is the Langfuse public API as suites use it (shared/langfuse).
type Langfuse interface {
	// DatasetItems reads a dataset's active items: input text (input, or
	// its query/question/prompt field) and expected output.
	DatasetItems(ctx context.Context, dataset string) ([]SuiteItem, error)
	// WriteBack records results of a suite run as an experiment (a dataset
	// run named after the suite run) with a trace and scores per item.
	WriteBack(ctx context.Context, e Experiment) error
}

// Experiment is a batch of suite run results for Langfuse.
type Experiment struct {
	Dataset   string
	RunName   string
	RunID     string
	AgentSlug string
	Items     []SuiteRunItem
}

// LangfuseItemID is the Langfuse dataset item an item result is of.
func (it SuiteRunItem) LangfuseItemID() string { return it.langfuseItemID }
