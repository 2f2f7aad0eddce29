package e2e

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The knowledge graph filled by events: an extractor configured on a
// knowledge base, files uploaded and indexed, kb-graph extracting each
// chunk on io.yuxi.document.indexed.v1 (scripted extraction model), the
// graph routes showing the entities; a schema change warns, resets and
// rebuilds; deleting a file removes only what nothing else mentions.
func TestGraphBuildsFromIndexedFiles(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	var calls atomic.Int64
	testkit.ScriptedExtractor(p.LLM, &calls)
	c := p.Admin
	kbID := c.NewKnowledgeBase("graph handbook", "graph", nil)
	base := "/api/knowledge/databases/" + kbID + "/graph-build"

	if r := c.Do("POST", base+"/config", map[string]any{"llm_model_spec": ""}); r.Status != http.StatusBadRequest {
		t.Fatalf("empty model: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", base+"/index", nil); r.Status != http.StatusConflict {
		t.Fatalf("index before config: %d %s", r.Status, r.Body)
	}
	cfg := c.OK("POST", base+"/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}, "concurrency": 2})["data"].(map[string]any)
	if cfg["reset"] != false || cfg["queued"] != float64(0) {
		t.Fatalf("first config: %v", cfg)
	}
	got := c.OK("GET", base+"/config", nil)["data"].(map[string]any)
	if got["llm_model_spec"] != "fake:extract" || got["concurrency"] != float64(2) {
		t.Fatalf("config: %v", got)
	}

	files := c.Ingest(kbID, map[string][]byte{
		"alice.md": []byte("# Staff\n\nThe engineer Alice works at Acme. The company Acme is based in Paris.\n"),
		"bob.md":   []byte("# Staff\n\nThe manager Bob works at Acme.\n"),
	}, 60*time.Second)
	st := c.WaitGraphBuilt(kbID, 60*time.Second)
	if st["total_chunks"] != float64(2) || st["failed_chunks"] != float64(0) {
		t.Fatalf("status: %v", st)
	}
	names := c.SubgraphNames(t, kbID)
	for _, n := range []string{"Alice", "Acme", "Paris", "Bob"} {
		if !names[n] {
			t.Fatalf("subgraph lacks %s: %v", n, names)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("extraction calls = %d, want one per chunk (2)", n)
	}

	// Only the concurrency changes: no reset, nothing extracted again.
	cfg = c.OK("POST", base+"/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}, "concurrency": 3})["data"].(map[string]any)
	if cfg["reset"] != false || cfg["queued"] != float64(2) {
		t.Fatalf("concurrency change: %v", cfg)
	}
	c.WaitGraphBuilt(kbID, 60*time.Second)
	// A schema change warns, resets and rebuilds every chunk.
	cfg = c.OK("POST", base+"/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing", "Place"}})["data"].(map[string]any)
	if cfg["reset"] != true || cfg["warning"] == "" || cfg["queued"] != float64(2) {
		t.Fatalf("schema change: %v", cfg)
	}
	c.WaitGraphBuilt(kbID, 60*time.Second)
	if n := c.SubgraphNames(t, kbID); len(n) != len(names) {
		t.Fatalf("rebuilt graph %v, before %v", n, names)
	}

	// Deleting bob.md removes Bob; Acme stays, alice.md mentions it.
	var bobID string
	for id, f := range files {
		if f["original_filename"] == "bob.md" {
			bobID = id
		}
	}
	c.OK("DELETE", "/api/knowledge/databases/"+kbID+"/documents/"+bobID, nil)
	after := c.SubgraphNames(t, kbID)
	if after["Bob"] || !after["Acme"] || !after["Alice"] || !after["Paris"] {
		t.Fatalf("after deleting bob.md: %v", after)
	}
	stats := c.OK("GET", "/api/graph/stats?kb_id="+kbID, nil)["data"].(map[string]any)
	if stats["total_files"] != float64(1) {
		t.Fatalf("stats after delete: %v", stats)
	}

	// Reset empties the graph; index rebuilds it from the indexed files.
	c.OK("POST", base+"/reset", nil)
	if n := c.SubgraphNames(t, kbID); len(n) != 0 {
		t.Fatalf("after reset: %v", n)
	}
	if q := c.OK("POST", base+"/index", nil)["data"].(map[string]any); q["queued"] != float64(1) {
		t.Fatalf("index: %v", q)
	}
	c.WaitGraphBuilt(kbID, 60*time.Second)
	if n := c.SubgraphNames(t, kbID); !n["Alice"] || n["Bob"] {
		t.Fatalf("rebuilt after reset: %v", n)
	}
}
