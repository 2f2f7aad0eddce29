package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// kb-graph gives the unique entities and triples it writes vectors in the
// knowledge base's "<kb_id>__graph" collection, by stable ids (a rebuild
// and reconcile's all_vectors write the same rows; deleting a file deletes
// the vectors of the entities and triples only it mentioned, at once, not
// at the next all_vectors; deleting the KB drops them).
func TestGraphBuildWritesEntityVectors(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	testkit.ScriptedExtractor(p.LLM, nil)
	c := p.Admin
	kbID := c.NewKnowledgeBase("graph vectors", "graph", nil)
	base := "/api/knowledge/databases/" + kbID
	c.OK("POST", base+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}})
	files := c.Ingest(kbID, map[string][]byte{
		"people.md":  []byte("The engineer Alice Martin works at Zephyr Labs.\n"),
		"offices.md": []byte("The company Zephyr Labs is based in Oslo.\n"),
	}, 60*time.Second)
	c.WaitGraphBuilt(kbID, 60*time.Second)
	stats := c.OK("GET", "/api/graph/stats?kb_id="+kbID, nil)["data"].(map[string]any)
	nodes, edges := int(stats["total_nodes"].(float64)), int(stats["total_edges"].(float64))
	count := func() (ents, triples int) {
		t.Helper()
		if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE id NOT LIKE 't|%'), count(*) FILTER (WHERE id LIKE 't|%')
			FROM vector_items WHERE collection = $1`, kbID+"__graph").Scan(&ents, &triples); err != nil {
			t.Fatal(err)
		}
		return
	}
	// kb-graph indexes vectors after its extraction commits; the build's
	// status can say done a moment earlier.
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, tr := count()
		if e == nodes && tr == edges {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("graph vectors: %d entities, %d triples; the graph has %d and %d", e, tr, nodes, edges)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if nodes < 3 || edges < 2 {
		t.Fatalf("graph: %v", stats)
	}
	r := c.Do("POST", base+"/graph-build/reconcile", map[string]any{"mode": "all_vectors"})
	if r.Status != http.StatusOK || r.JSON()["data"].(map[string]any)["reindexed_entities"] != float64(nodes) {
		t.Fatalf("reconcile all_vectors: %d %s", r.Status, r.Body)
	}
	if e, tr := count(); e != nodes || tr != edges {
		t.Fatalf("after all_vectors: %d entities, %d triples; want %d and %d", e, tr, nodes, edges)
	}
	if r := c.Do("POST", base+"/graph-build/reconcile", map[string]any{"mode": "everything"}); r.Status != 422 || r.Code() != "invalid_mode" {
		t.Fatalf("unknown mode: %d %s", r.Status, r.Body)
	}
	// Deleting people.md orphans Alice Martin and her triple: their vectors
	// go with the deletion (before it answers); Zephyr Labs and Oslo stay.
	for id, meta := range files {
		if meta["filename"] == "people.md" {
			c.OK("DELETE", base+"/documents/"+id, nil)
		}
	}
	stats = c.OK("GET", "/api/graph/stats?kb_id="+kbID, nil)["data"].(map[string]any)
	left, leftEdges := int(stats["total_nodes"].(float64)), int(stats["total_edges"].(float64))
	if left >= nodes || left == 0 {
		t.Fatalf("graph after deleting people.md: %v (had %d entities)", stats, nodes)
	}
	if e, tr := count(); e != left || tr != leftEdges {
		t.Fatalf("after deleting people.md: %d entity and %d triple vectors; the graph has %d and %d", e, tr, left, leftEdges)
	}
	var stray int
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM vector_items v WHERE v.collection = $1 AND v.id NOT LIKE 't|%'
		AND NOT EXISTS (SELECT 1 FROM graph_entities e WHERE e.kb_id = $2 AND e.entity_id = v.id)`, kbID+"__graph", kbID).Scan(&stray); err != nil || stray != 0 {
		t.Fatalf("%d vectors of entities no longer in the graph (%v)", stray, err)
	}
	// Deleting the KB purges its graph collection with its own.
	c.OK("DELETE", base, nil)
	deadline = time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM vector_collections WHERE name = $1`, kbID+"__graph").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the graph collection outlived its KB")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
