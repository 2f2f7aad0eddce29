package graph_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/graphtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// ExternalCleaner (the cleaner of an engine outside PostgreSQL) removes the
// files' extraction progress in the deleting transaction and their graph
// through the engine's own calls; a rolled-back deletion keeps the progress.
// The engine here is the embedded one, driven only through graph.Engine.
func TestExternalCleanerRemovesProgressAndGraph(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	eng := graph.NewPostgres(pool)
	if err := eng.WriteChunks(ctx, "kb", []graph.ChunkGraph{
		graphtest.Chunk("f1_a", "f1", nil, [3]string{"Alice", "knows", "Bob"}),
		graphtest.Chunk("f2_a", "f2", nil, [3]string{"Bob", "knows", "Carol"}),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO graph_chunk_extractions (kb_id, chunk_id, file_id, status) VALUES
		('kb', 'f1_a', 'f1', 'done'), ('kb', 'f2_a', 'f2', 'done')`); err != nil {
		t.Fatal(err)
	}
	c := graph.ExternalCleaner{Engine: eng}
	progress := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM graph_chunk_extractions WHERE kb_id = 'kb'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A deletion that rolls back keeps the progress rows (its graph is gone:
	// the engine has no transaction to share).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveFilesTx(ctx, tx, "kb", []string{"f1", "f1"}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if n := progress(); n != 2 {
		t.Fatalf("%d progress rows after a rolled-back deletion, want 2", n)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := c.RemoveFilesTx(ctx, tx, "kb", []string{"f1"}); return err }); err != nil {
		t.Fatal(err)
	}
	if n := progress(); n != 1 {
		t.Fatalf("%d progress rows after deleting f1, want 1", n)
	}
	found, err := eng.FindEntities(ctx, "kb", "*", 10)
	if err != nil || len(found) != 2 {
		t.Fatalf("entities after deleting f1 = %+v, %v (want Bob and Carol)", found, err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return c.RemoveKBTx(ctx, tx, "kb") }); err != nil {
		t.Fatal(err)
	}
	if s, _ := eng.Stats(ctx, "kb"); progress() != 0 || s.Entities != 0 {
		t.Fatalf("after removing the knowledge base: %d progress rows, stats %+v", progress(), s)
	}
}
