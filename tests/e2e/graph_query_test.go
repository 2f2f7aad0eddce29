package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Graph retrieval end to end: a knowledge base whose graph kb-graph built
// from io.yuxi.document.indexed.v1 (scripted extractor over the
// deterministic annotator) answers a query with use_graph_retrieval by a
// chunk that shares no word with the query and that only the graph links
// (Alice Martin → Zephyr Labs → Oslo), through the query-test route and the
// agent's query_kb tool; without the option the chunk is not found.
func TestGraphAugmentedQuery(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	testkit.ScriptedExtractor(p.LLM, nil)
	c := p.Admin
	kbID := c.NewKnowledgeBase("graph retrieval", "graph", testkit.GlobalReadShare())
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}})
	c.Ingest(kbID, map[string][]byte{
		"people.md":  []byte("The engineer Alice Martin works at Zephyr Labs.\n"),
		"offices.md": []byte("The company Zephyr Labs is based in Oslo.\n"),
		"other.md":   []byte("The company Borealis is based in Bergen.\n"),
		"more.md":    []byte("The designer Carl Holm works at Borealis.\n"),
	}, 60*time.Second)
	c.WaitGraphBuilt(kbID, 60*time.Second)

	query := func(opts map[string]any) []string {
		r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query-test", map[string]any{"query": "Alice Martin engineer", "meta": opts})
		if r.Status != http.StatusOK {
			t.Fatalf("query-test %v: %d %s", opts, r.Status, r.Body)
		}
		var res []struct {
			Content  string         `json:"content"`
			Metadata map[string]any `json:"metadata"`
			Sources  []string       `json:"fusion_sources"`
			Graph    *float64       `json:"graph_score"`
		}
		r.Decode(t, &res)
		var out []string
		for _, x := range res {
			out = append(out, x.Metadata["source"].(string))
			if x.Metadata["source"] == "offices.md" && (x.Graph == nil || !slices.Equal(x.Sources, []string{"graph"})) {
				t.Fatalf("offices.md found by %v, graph score %v", x.Sources, x.Graph)
			}
		}
		return out
	}
	if got := query(map[string]any{"search_mode": "keyword"}); !slices.Equal(got, []string{"people.md"}) {
		t.Fatalf("keyword search alone found %v, want only people.md", got)
	}
	got := query(map[string]any{"search_mode": "keyword", "use_graph": true})
	if len(got) < 2 || got[0] != "people.md" || got[1] != "offices.md" || slices.Contains(got, "more.md") {
		t.Fatalf("graph-augmented search found %v, want people.md then offices.md (Bergen's graph is not linked)", got)
	}
	if r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query-test", map[string]any{"query": "x", "meta": map[string]any{"use_graph_retrieval": true, "graph_depth": 9}}); r.Status != http.StatusUnprocessableEntity || r.Code() != "invalid_query_params" {
		t.Fatalf("graph_depth 9: %d %s", r.Status, r.Body)
	}
	// depend_on as the original: the graph options hang on use_graph_retrieval.
	b, _ := json.Marshal(c.OK("GET", "/api/knowledge/databases/"+kbID+"/query-params", nil))
	for _, key := range []string{"graph_entity_top_k", "graph_depth", "graph_max_nodes", "graph_top_k", "graph_weight", "ppr_damping"} {
		if !strings.Contains(string(b), `"depend_on":"use_graph_retrieval=true","key":"`+key+`"`) {
			t.Fatalf("query params: %s does not depend on use_graph_retrieval: %s", key, b)
		}
	}
	if !strings.Contains(string(b), `"default":false,"key":"use_graph_retrieval"`) {
		t.Fatalf("query params: graph retrieval is not off by default: %s", b)
	}

	// Saved on the knowledge base, the option reaches the agent's query_kb.
	c.OK("PUT", "/api/knowledge/databases/"+kbID+"/query-params", map[string]any{"use_graph_retrieval": true})
	c.OK("POST", "/api/agent", map[string]any{"name": "Graph helper", "slug": "graph-helper",
		"config_json": map[string]any{"context": map[string]any{"knowledges": []string{kbID}}}})
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Model == "extract" {
			return llmtest.Text(`{"entities":[],"relations":[]}`)
		}
		if req.Messages[len(req.Messages)-1].Role != "tool" {
			return llmtest.Calls(llmtest.ToolCall{ID: "call_graph", Name: "query_kb",
				Arguments: fmt.Sprintf(`{"kb_id":%q,"query_text":"Alice Martin engineer"}`, kbID)})
		}
		return llmtest.Text("done")
	})
	const question = "Where is Alice Martin's employer based?"
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "graph-helper", "title": "graph"})["id"].(string)
	in := c.OK("POST", "/api/agent/runs", map[string]any{"query": question, "agent_slug": "graph-helper", "thread_id": th})
	runID, _ := in["run_id"].(string)
	if runID == "" {
		t.Fatalf("intake: %v", in)
	}
	c.Collect(runID, 30*time.Second)
	reqs := modelRequestsFor(t, p, question)
	if len(reqs) < 2 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	res := testkit.ToolMessages(reqs[1])["call_graph"]
	if !strings.Contains(res, "Zephyr Labs is based in Oslo") || !strings.Contains(res, "graph_score") {
		t.Fatalf("query_kb with the saved graph option did not return the linked chunk: %s", res)
	}
}
