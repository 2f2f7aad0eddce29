package testkit

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

// capitalized is the deterministic entity annotator of ScriptedExtractor: a
// capitalized word (or run of them) that does not start a sentence.
var capitalized = regexp.MustCompile(`[A-Z][a-z]+(?: [A-Z][a-z]+)*`)

// ExtractGraph is the scripted extractor's annotation of a chunk text: its
// capitalized names (sentence-initial words excepted) are entities of type
// "Thing", and names in one sentence are linked by "related_to" in order.
func ExtractGraph(text string) map[string]any {
	var ents []map[string]any
	var rels []map[string]any
	seen := map[string]bool{}
	for _, sentence := range strings.FieldsFunc(text, func(r rune) bool { return r == '.' || r == '\n' || r == '!' || r == '?' }) {
		s := strings.TrimSpace(sentence)
		var names []string
		for _, loc := range capitalized.FindAllStringIndex(s, -1) {
			name := s[loc[0]:loc[1]]
			if loc[0] == 0 {
				// A sentence-initial word is an entity only if a name follows it.
				if i := strings.IndexByte(name, ' '); i >= 0 {
					name = name[i+1:]
				} else {
					continue
				}
			}
			names = append(names, name)
			if !seen[name] {
				seen[name] = true
				ents = append(ents, map[string]any{"name": name, "type": "Thing"})
			}
		}
		for i := 1; i < len(names); i++ {
			if names[i] != names[i-1] {
				rels = append(rels, map[string]any{"source": names[i-1], "target": names[i], "type": "related_to"})
			}
		}
	}
	if ents == nil {
		ents = []map[string]any{}
	}
	if rels == nil {
		rels = []map[string]any{}
	}
	return map[string]any{"entities": ents, "relations": rels}
}

// ScriptedExtractor makes s answer graph-extraction requests (model
// "extract", the spec "fake:extract") with ExtractGraph of the chunk text,
// and counts them in calls (may be nil). Other models answer "?".
func ScriptedExtractor(s *llmtest.Server, calls *atomic.Int64) {
	s.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Model != "extract" {
			return llmtest.Text("?")
		}
		if calls != nil {
			calls.Add(1)
		}
		msg := req.LastUserMessage()
		if i := strings.Index(msg, "Text:\n"); i >= 0 {
			msg = msg[i+len("Text:\n"):]
		}
		b, _ := json.Marshal(ExtractGraph(msg))
		return llmtest.Text(string(b))
	})
}

// WaitGraphBuilt polls the graph-build status of a knowledge base until
// every committed chunk is extracted (done), and returns the status.
func (c *Client) WaitGraphBuilt(kbID string, timeout time.Duration) map[string]any {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := c.OK("GET", "/api/knowledge/databases/"+kbID+"/graph-build/status", nil)["data"].(map[string]any)
		if st["status"] == "done" {
			return st
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("graph of %s not built in %s: %v", kbID, timeout, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SubgraphNames returns the entity names of GET /api/graph/subgraph of a
// knowledge base (all entities, 2 hops, up to 1000).
func (c *Client) SubgraphNames(t testing.TB, kbID string) map[string]bool {
	t.Helper()
	v := c.OK("GET", "/api/graph/subgraph?kb_id="+kbID+"&node_label=*&max_nodes=1000", nil)["data"].(map[string]any)
	out := map[string]bool{}
	for _, n := range v["nodes"].([]any) {
		out[n.(map[string]any)["labels"].([]any)[0].(string)] = true
	}
	return out
}
