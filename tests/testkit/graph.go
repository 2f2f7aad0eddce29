package testkit

import (
	"encoding/json"
	"regexp"
	"sort"
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
	ScriptedExtractorWith(s, calls, ExtractGraph)
}

// ScriptedExtractorWith is ScriptedExtractor with another deterministic
// annotator (chunk text → {"entities", "relations"}).
func ScriptedExtractorWith(s *llmtest.Server, calls *atomic.Int64, annotate func(text string) map[string]any) {
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
		b, _ := json.Marshal(annotate(msg))
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

// DictionaryAnnotator is a deterministic annotator over a fixed dictionary:
// every term that occurs in the text as a whole word (not inside a longer
// run of letters, digits, '_', '-', '.' or '/') is an entity of type
// "Term", and every two terms of one text are linked by "co_mentioned"
// (the first maxPair terms of the text in order of first occurrence, so a
// long list does not make the pairs quadratic). Terms are matched
// case-sensitively, longest first at each position.
func DictionaryAnnotator(terms []string, maxPair int) func(text string) map[string]any {
	byLen := append([]string(nil), terms...)
	sort.SliceStable(byLen, func(i, j int) bool { return len(byLen[i]) > len(byLen[j]) })
	return func(text string) map[string]any {
		found := DictionaryTerms(byLen, text)
		ents := []map[string]any{}
		rels := []map[string]any{}
		for _, t := range found {
			ents = append(ents, map[string]any{"name": t, "type": "Term"})
		}
		if len(found) > maxPair {
			found = found[:maxPair]
		}
		for i := range found {
			for j := i + 1; j < len(found); j++ {
				rels = append(rels, map[string]any{"source": found[i], "target": found[j], "type": "co_mentioned"})
			}
		}
		return map[string]any{"entities": ents, "relations": rels}
	}
}

// DictionaryTerms returns the terms (longest first is the caller's order)
// that occur in text as whole words, in order of first occurrence.
func DictionaryTerms(terms []string, text string) []string {
	type hit struct {
		at   int
		term string
	}
	var hits []hit
	taken := make([]bool, len(text))
	for _, t := range terms {
		for from := 0; ; {
			i := strings.Index(text[from:], t)
			if i < 0 {
				break
			}
			i += from
			from = i + 1
			end := i + len(t)
			if (i > 0 && termByte(text[i-1])) || (end < len(text) && termByte(text[end]) && !(text[end] == '.' && (end+1 == len(text) || !termByte(text[end+1])))) || taken[i] || taken[end-1] {
				continue
			}
			for k := i; k < end; k++ {
				taken[k] = true
			}
			hits = append(hits, hit{i, t})
			break
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.term
	}
	return out
}

func termByte(b byte) bool {
	return b == '_' || b == '-' || b == '.' || b == '/' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
