package graph_test

import (
	"context"
	"errors"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/graphtest"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// kbsOf shares "mine" (native) and "conn" (a dify connector) with uid "a".
type kbsOf struct{}

func (kbsOf) KB(_ context.Context, sub access.Subject, id string) (kb.KB, error) {
	if sub.UID != "a" {
		return kb.KB{}, failure.NotFound("kb_not_found", "no")
	}
	switch id {
	case "mine":
		return kb.KB{KBID: id, KBType: "milvus"}, nil
	case "conn":
		return kb.KB{KBID: id, KBType: "dify"}, nil
	}
	return kb.KB{}, failure.NotFound("kb_not_found", "no")
}

func (kbsOf) List(_ context.Context, sub access.Subject) ([]kb.KB, error) {
	if sub.UID != "a" {
		return nil, nil
	}
	return []kb.KB{{KBID: "mine", KBType: "milvus"}, {KBID: "conn", KBType: "dify"}}, nil
}

func TestServiceSubgraphLabelsStats(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	eng := graph.NewPostgres(pool)
	svc := &graph.Service{Engine: eng, KBs: kbsOf{}}
	a, b := access.Subject{UID: "a"}, access.Subject{UID: "b"}
	if err := eng.WriteChunks(ctx, "mine", []graph.ChunkGraph{
		graphtest.Chunk("c1", "f", nil, [3]string{"a", "r", "b"}, [3]string{"b", "r", "c"}, [3]string{"c", "r", "d"}),
	}); err != nil {
		t.Fatal(err)
	}
	list, err := svc.List(ctx, a)
	if err != nil || len(list) != 1 || list[0].ID != "mine" {
		t.Fatalf("List = %+v, %v; want only the native KB", list, err)
	}
	v, err := svc.Subgraph(ctx, a, graph.SubgraphQuery{KBID: "mine", NodeLabel: "a", MaxDepth: 1})
	if err != nil || v.TotalNodes != 2 || v.TotalEdges != 1 {
		t.Fatalf("depth 1 from a = %+v, %v", v, err)
	}
	v, _ = svc.Subgraph(ctx, a, graph.SubgraphQuery{KBID: "mine", NodeLabel: "a", MaxDepth: 3})
	if v.TotalNodes != 4 || v.TotalEdges != 3 || v.Nodes[0].Labels[0] != "a" || v.Nodes[0].EntityType != "Person" {
		t.Fatalf("depth 3 from a = %+v", v)
	}
	v, _ = svc.Subgraph(ctx, a, graph.SubgraphQuery{KBID: "mine", NodeLabel: "a", MaxDepth: 3, MaxNodes: 2})
	if v.TotalNodes != 2 || !v.IsTruncated {
		t.Fatalf("max_nodes 2 = %+v", v)
	}
	for _, q := range []graph.SubgraphQuery{{KBID: "mine", MaxDepth: 6}, {KBID: "mine", MaxNodes: 1001}, {KBID: ""}} {
		var fe *failure.Error
		if _, err := svc.Subgraph(ctx, a, q); !errors.As(err, &fe) || fe.Kind != failure.KindInvalid {
			t.Fatalf("Subgraph(%+v) = %v, want an invalid-input failure", q, err)
		}
	}
	if l, err := svc.Labels(ctx, a, "mine"); err != nil || len(l) != 1 || l[0] != "Person" {
		t.Fatalf("Labels = %v, %v", l, err)
	}
	if s, err := svc.Stats(ctx, a, "mine"); err != nil || s.Entities != 4 || s.Relations != 3 {
		t.Fatalf("Stats = %+v, %v", s, err)
	}
	// Another user, or a connector KB, is refused before the engine is read.
	for _, c := range []struct {
		sub access.Subject
		kb  string
	}{{b, "mine"}, {a, "conn"}} {
		if _, err := svc.Stats(ctx, c.sub, c.kb); !errors.Is(err, failure.NotFound("", "")) {
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Kind != failure.KindNotFound {
				t.Fatalf("Stats(%s, %s) = %v, want not found", c.sub.UID, c.kb, err)
			}
		}
	}
}
