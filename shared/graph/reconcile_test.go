package graph_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// indexedFiles is the knowledge-base store as Reconcile reads it.
type indexedFiles []string

func (indexedFiles) LoadFile(context.Context, string) (kb.File, error)          { return kb.File{}, nil }
func (indexedFiles) FileChunks(context.Context, string) ([]kb.ChunkView, error) { return nil, nil }
func (f indexedFiles) IndexedFileIDs(context.Context, string) ([]string, error) { return f, nil }
func (indexedFiles) ChunkCount(context.Context, string) (int64, error)          { return 0, nil }

// emitted records the events of a transaction (the outbox at the protocol
// Reconcile uses).
type emitted struct{ files []string }

func (e *emitted) Tx(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, fn func(tx pgx.Tx, emit outbox.Emit) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := fn(tx, func(ps ...outbox.Pending) error {
		for _, p := range ps {
			e.files = append(e.files, p.Payload.(events.DocumentIndexed).FileID)
		}
		return nil
	}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Reconcile forgets failed (and given-up) extractions and queues exactly
// the still-indexed files that had them; the next build extracts those
// chunks again. all_vectors and unknown modes are refused.
func TestReconcileRetriesFailedChunks(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	eng := graph.NewPostgres(pool)
	ob := &emitted{}
	b := graph.NewBuilder(pool, eng, indexedFiles{"f", "g"}, nil, ob, managing{})
	sub := access.Subject{UID: "a", Role: "admin"}
	if _, err := b.Reconcile(ctx, sub, "kb", ""); !hasCode(err, "graph_not_configured") {
		t.Fatalf("without an extractor: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO graph_extractor_configs (kb_id, llm_model_spec) VALUES ('kb', 'fake:m')`); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t)
	var garbage atomic.Bool
	var calls atomic.Int64
	garbage.Store(true)
	srv.Handle(annotator(&garbage, &calls))
	model := llm.NewClient(llm.Provider{ID: "fake", BaseURL: srv.URL()}, nil)
	b.Extractor.Tries, b.Extractor.MaxAttempts = 1, 1
	chunks := []graph.ChunkText{{ID: "f_1", Content: "Erin knows Finn."}, {ID: "f_2", Content: "Gus knows Hal. GARBAGE"}}
	if _, err := b.Extractor.ExtractFile(ctx, "kb", "f", chunks, graph.Schema{}, model, "m", 1); err == nil {
		t.Fatal("the garbage chunk did not fail")
	}
	// A failed chunk of a file no longer indexed is forgotten, not queued.
	if _, err := b.Extractor.ExtractFile(ctx, "kb", "gone", []graph.ChunkText{{ID: "gone_1", Content: "GARBAGE"}}, graph.Schema{}, model, "m", 1); err == nil {
		t.Fatal("the gone file's chunk did not fail")
	}
	if res, err := b.Extractor.ExtractFile(ctx, "kb", "f", chunks, graph.Schema{}, model, "m", 1); err != nil || res.GaveUp != 1 {
		t.Fatalf("given up: %+v %v", res, err)
	}
	res, err := b.Reconcile(ctx, sub, "kb", "failed")
	if err != nil || res.RetriedChunks != 2 || res.QueuedFiles != 1 || res.Status != "queued" || !slices.Equal(ob.files, []string{"f"}) {
		t.Fatalf("reconcile: %+v %v, queued %v", res, err, ob.files)
	}
	garbage.Store(false)
	before := calls.Load()
	if res, err := b.Extractor.ExtractFile(ctx, "kb", "f", chunks, graph.Schema{}, model, "m", 1); err != nil || res.Extracted != 1 || calls.Load() != before+1 {
		t.Fatalf("after reconcile: %+v %v (calls %d → %d)", res, err, before, calls.Load())
	}
	if res, err := b.Reconcile(ctx, sub, "kb", ""); err != nil || res.Status != "nothing_to_do" || res.RetriedChunks != 0 {
		t.Fatalf("nothing left: %+v %v", res, err)
	}
	if _, err := b.Reconcile(ctx, sub, "kb", "all_vectors"); !hasCode(err, "graph_vectors_unsupported") {
		t.Fatalf("all_vectors: %v", err)
	}
	if _, err := b.Reconcile(ctx, sub, "kb", "everything"); !hasCode(err, "invalid_mode") {
		t.Fatalf("unknown mode: %v", err)
	}
}

func hasCode(err error, code string) bool {
	fe, ok := failure.As(err)
	return ok && fe.Code == code
}
