// Package graphbuild is the handler of the kb-graph function: on
// io.yuxi.document.indexed.v1 it brings the knowledge graph of the file up
// to date with its committed chunks (graph.Builder.BuildFile: only chunks
// whose content was not extracted yet, at the knowledge base's configured
// concurrency, per-chunk progress persisted). A redelivered, stale or
// resumed event redoes only what is not done; a knowledge base without an
// extractor configuration is skipped.
//
// Imported by: functions/kb-graph (main), infra/local, tests.
// May import: events, shared/* (not pgx: shared/graph owns the tables).
package graphbuild

import (
	"context"
	"log/slog"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
)

// Builder is the use case the handler drives (graph.Builder).
type Builder interface {
	BuildFile(ctx context.Context, kbID, fileID string) (graph.ExtractResult, error)
}

// Handler handles document.indexed.
type Handler struct {
	b   Builder
	log *slog.Logger
}

// New returns the handler.
func New(b Builder, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	return &Handler{b: b, log: log}
}

// Register adds the handler to a function router.
func (h *Handler) Register(r *faas.Router) { faas.On(r, h.Indexed) }

// Indexed extracts the graph of one file. A coded failure (a model that
// does not exist) is permanent; anything else, including chunks that failed
// this time, is retried by redelivery.
func (h *Handler) Indexed(ctx context.Context, in events.DocumentIndexed) error {
	res, err := h.b.BuildFile(ctx, in.KBID, in.FileID)
	if res.Extracted+res.Removed+res.Failed+res.GaveUp > 0 {
		h.log.Info("graph extracted", "kb", in.KBID, "file", in.FileID, "extracted", res.Extracted, "skipped", res.Skipped,
			"removed", res.Removed, "failed", res.Failed, "gave_up", res.GaveUp)
	}
	if _, coded := failure.As(err); coded {
		return faas.Permanent(err)
	}
	return err
}
