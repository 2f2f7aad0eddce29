package mindmap_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/mindmap"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// A deletion cuts the deleted files' leaves and the categories left empty,
// keeps a leaf whose name another covered file still has, and leaves a map
// that covers none of the deleted files untouched.
func TestFilesDeletedTxCutsLeaves(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	if _, err := pool.Exec(ctx, `INSERT INTO knowledge_bases (kb_id, name, embedding_model_spec, embedding_dim, created_by)
		VALUES ('kb', 'kb', 'fake:e', 8, 'a')`); err != nil {
		t.Fatal(err)
	}
	tree := `{"content":"kb","children":[{"content":"Docs","children":[{"content":"a.md"},{"content":"c.md"}]},{"content":"Other","children":[{"content":"b.md"}]}]}`
	meta := `{"mode":"full","file_names":{"f1":"a.md","f2":"a.md","f3":"b.md","f4":"c.md"}}`
	if _, err := pool.Exec(ctx, `INSERT INTO kb_mindmaps (kb_id, mindmap, file_ids, metadata) VALUES ('kb', $1, $2, $3)`,
		tree, []string{"f1", "f2", "f3", "f4"}, meta); err != nil {
		t.Fatal(err)
	}
	s := &mindmap.Service{Pool: pool}
	run := func(ids ...string) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return s.FilesDeletedTx(ctx, tx, "kb", ids) }); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (string, []string, map[string]any) {
		var tb, mb []byte
		var ids []string
		if err := pool.QueryRow(ctx, `SELECT mindmap, file_ids, metadata FROM kb_mindmaps WHERE kb_id = 'kb'`).Scan(&tb, &ids, &mb); err != nil {
			t.Fatal(err)
		}
		var n mindmap.Node
		var m map[string]any
		_ = json.Unmarshal(tb, &n)
		_ = json.Unmarshal(mb, &m)
		return mindmap.Render("kb", n), ids, m
	}
	run("f9") // not in the map
	if r, ids, m := load(); len(ids) != 4 || m["pruned_files"] != nil || r != "知识库 kb 的思维导图结构：\n\n- kb\n  - Docs\n    - a.md\n    - c.md\n  - Other\n    - b.md" {
		t.Fatalf("an unrelated deletion changed the map: %s %v %v", r, ids, m)
	}
	run("f1", "f3", "f9")
	r, ids, m := load()
	if r != "知识库 kb 的思维导图结构：\n\n- kb\n  - Docs\n    - a.md\n    - c.md" || !slices.Equal(ids, []string{"f2", "f4"}) ||
		m["pruned_files"] != float64(2) || m["mode"] != "full" {
		t.Fatalf("after deleting f1 and f3: %s %v %v", r, ids, m)
	}
	run("f2")
	if r, ids, m := load(); r != "知识库 kb 的思维导图结构：\n\n- kb\n  - Docs\n    - c.md" || !slices.Equal(ids, []string{"f4"}) || m["pruned_files"] != float64(3) {
		t.Fatalf("after deleting f2: %s %v %v", r, ids, m)
	}
}
