package graph_test

import (
	"context"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// gatedModel answers an extraction only when released, after telling
// started that it was asked.
type gatedModel struct{ started, release chan struct{} }

func (m gatedModel) Stream(ctx context.Context, _ llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	m.started <- struct{}{}
	<-m.release
	return llm.Response{Content: `{"entities":[{"name":"Alice","type":"Person"},{"name":"Bob","type":"Person"}],
		"relations":[{"source":"Alice","target":"Bob","type":"knows"}]}`}, nil
}

// managing lets every subject manage every knowledge base (the access check
// is not what this test is about).
type managing struct{}

func (managing) KB(context.Context, access.Subject, string) (kb.KB, error) {
	return kb.KB{KBType: "milvus"}, nil
}
func (managing) List(context.Context, access.Subject) ([]kb.KB, error) { return nil, nil }
func (managing) GetManaged(context.Context, access.Subject, string) (kb.KB, error) {
	return kb.KB{KBType: "milvus"}, nil
}

// A reset while an extraction is in flight: the extraction, started under
// the old configuration version, must neither mark its chunk done nor leave
// its graph behind (before the fix it did both, and the chunk was never
// extracted again).
func TestResetDuringExtractionLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	eng := graph.NewPostgres(pool)
	b := graph.NewBuilder(pool, eng, nil, nil, nil, managing{})
	if _, err := pool.Exec(ctx, `INSERT INTO graph_extractor_configs (kb_id, llm_model_spec) VALUES ('kb', 'fake:m')`); err != nil {
		t.Fatal(err)
	}
	cfg, ok, err := b.Config(ctx, "kb")
	if err != nil || !ok {
		t.Fatalf("config: %v %v", ok, err)
	}
	m := gatedModel{started: make(chan struct{}), release: make(chan struct{})}
	type result struct {
		res graph.ExtractResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := b.Extractor.ExtractFile(ctx, "kb", "f", []graph.ChunkText{{ID: "f_1", Content: "Alice knows Bob."}},
			graph.Schema{Version: cfg.Version}, m, "m", 1)
		done <- result{res, err}
	}()
	<-m.started
	if err := b.Reset(ctx, access.Subject{UID: "u", Role: "superadmin"}, "kb"); err != nil {
		t.Fatal(err)
	}
	close(m.release)
	r := <-done
	if r.err != nil || r.res.Extracted != 0 || r.res.Superseded != 1 {
		t.Fatalf("extraction racing the reset: %+v, %v; want 1 superseded", r.res, r.err)
	}
	if s, _ := eng.Stats(ctx, "kb"); s.Entities != 0 || s.Relations != 0 {
		t.Fatalf("the graph after the reset holds %+v", s)
	}
	var marked int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM graph_chunk_extractions WHERE kb_id = 'kb'`).Scan(&marked); err != nil || marked != 0 {
		t.Fatalf("progress rows after the reset: %d, %v", marked, err)
	}
	// Under the current version the chunk is extracted and kept.
	cfg, _, _ = b.Config(ctx, "kb")
	m2 := gatedModel{started: make(chan struct{}, 1), release: make(chan struct{})}
	close(m2.release)
	res, err := b.Extractor.ExtractFile(ctx, "kb", "f", []graph.ChunkText{{ID: "f_1", Content: "Alice knows Bob."}},
		graph.Schema{Version: cfg.Version}, m2, "m", 1)
	if s, _ := eng.Stats(ctx, "kb"); err != nil || res.Extracted != 1 || s.Entities != 2 {
		t.Fatalf("extraction after the reset: %+v, %v, graph %+v", res, err, s)
	}
}
