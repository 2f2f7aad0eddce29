package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// yuxiDocsFile is the original Yuxi documentation (Chinese, its pages
// concatenated, 341 KB) kept next to the repository in shared/spec.
const yuxiDocsFile = "003_1771479fa814e438.txt"

// specFile finds a file of shared/spec the way datasetDir finds a data set:
// YUXI_SPEC_DIR, or shared/spec next to an ancestor directory; the test is
// skipped when it is not there (a fresh clone under /tmp).
func specFile(t *testing.T, name string) string {
	if d := os.Getenv("YUXI_SPEC_DIR"); d != "" {
		return filepath.Join(d, name)
	}
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if p := filepath.Join(d, "shared", "spec", name); fileExists(p) {
			return p
		}
	}
	t.Skip(name + " not found (set YUXI_SPEC_DIR)")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// codeSpan and identifierLike make the annotator's dictionary: the code
// spans the docs themselves mark (`…`) that look like identifiers — config
// keys, routes, paths, tool, class and component names (query_kb,
// SANDBOX_PROVISIONER_TOKEN, /home/gem/skills, SubAgentBackend,
// sandbox-provisioner …): at least 4 characters of [A-Za-z0-9_./-], and
// either one of "_./-" or a capital letter after the first character, so
// plain words (`task`, `main`) stay out.
var (
	codeSpan       = regexp.MustCompile("`([^`\n]{4,40})`")
	identifierLike = regexp.MustCompile(`^[A-Za-z_./-][A-Za-z0-9_./-]+$`)
)

func docsDictionary(doc string) []string {
	seen := map[string]bool{}
	var terms []string
	for _, m := range codeSpan.FindAllStringSubmatch(doc, -1) {
		s := m[1]
		if seen[s] || !identifierLike.MatchString(s) || !strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") ||
			!(strings.ContainsAny(s, "_./-") || strings.ContainsAny(s[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ")) {
			continue
		}
		seen[s] = true
		terms = append(terms, s)
	}
	sort.Slice(terms, func(i, j int) bool {
		return len(terms[i]) > len(terms[j]) || len(terms[i]) == len(terms[j]) && terms[i] < terms[j]
	})
	return terms
}

// The quality check of graph retrieval on real text: a multi-hop set built
// from the Yuxi docs. Construction (deterministic, no network):
//
//   - Corpus: the docs file uploaded as one Markdown file through the normal
//     upload → parse → index path (default chunking, 512 tokens); the chunks
//     are read back from GET …/documents/{id}.
//   - Annotator: a fixed dictionary (docsDictionary: the identifier-like code
//     spans of the docs — config keys, routes, paths, tool and component
//     names), matched as whole words in a chunk's text; entities are the
//     matched terms, relations are co-mentions within the chunk
//     (testkit.DictionaryAnnotator). kb-graph builds the graph with the
//     scripted extractor answering that annotation.
//   - Questions: for each term e mentioned by exactly two chunks A and B
//     (in term order; a pair of chunks once), where A has terms no other
//     chunk mentions, the question names up to two of those terms of A and
//     asks what the other chunk that shares a configuration with them says
//     — it never names e or any term of B. Gold = both chunks; B is reachable
//     only through the shared entity e. At most 40 questions.
//
// It reports Recall@10 over both evidence chunks (and over B alone) for
// hybrid search and hybrid + graph retrieval, and requires the graph to win.
func TestGraphRetrievalBeatsHybridOnYuxiDocs(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(specFile(t, yuxiDocsFile))
	if err != nil {
		t.Fatal(err)
	}
	dict := docsDictionary(string(raw))
	p := testkit.StartLocal(t, nil)
	testkit.ScriptedExtractorWith(p.LLM, nil, testkit.DictionaryAnnotator(dict, 40))
	c := p.Admin
	kbID, _ := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "yuxi-docs", "description": "multi-hop quality check"})["kb_id"].(string)
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Term"}, "concurrency": 4})
	files := c.Ingest(kbID, map[string][]byte{"yuxi-docs.md": raw}, 300*time.Second)
	var fileID string
	for id, meta := range files {
		if meta["status"] != "indexed" {
			t.Fatalf("docs not indexed: %v", meta)
		}
		fileID = id
	}
	st := c.WaitGraphBuilt(kbID, 300*time.Second)

	var doc struct {
		Chunks []struct {
			ID      string `json:"chunk_id"`
			Content string `json:"content"`
		} `json:"chunks"`
	}
	c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID, nil).Decode(t, &doc)
	terms := map[string][]string{} // chunk → its terms
	df := map[string][]string{}    // term → chunks mentioning it
	for _, ch := range doc.Chunks {
		terms[ch.ID] = testkit.DictionaryTerms(dict, ch.Content)
		for _, e := range terms[ch.ID] {
			df[e] = append(df[e], ch.ID)
		}
	}
	type question struct{ text, a, b string }
	var qs []question
	used := map[[2]string]bool{}
	linking := make([]string, 0, len(df))
	for e, cs := range df {
		if len(cs) == 2 {
			linking = append(linking, e)
		}
	}
	sort.Strings(linking)
	for _, e := range linking {
		for _, ab := range [][2]string{{df[e][0], df[e][1]}, {df[e][1], df[e][0]}} {
			var own []string
			for _, x := range terms[ab[0]] {
				if len(df[x]) == 1 {
					own = append(own, x)
				}
			}
			if len(own) == 0 || used[ab] || used[[2]string{ab[1], ab[0]}] || len(qs) == 40 {
				continue
			}
			used[ab] = true
			if len(own) > 2 {
				own = own[:2]
			}
			qs = append(qs, question{fmt.Sprintf("和 %s 写在一起的那个配置，文档另一处是怎么说明的？", strings.Join(own, " 和 ")), ab[0], ab[1]})
			break
		}
	}
	if len(qs) < 20 {
		t.Fatalf("only %d multi-hop questions from %d chunks and %d dictionary terms", len(qs), len(doc.Chunks), len(dict))
	}

	recall := func(opts map[string]any) (both, second float64) {
		for _, q := range qs {
			r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query-test", map[string]any{"query": q.text, "meta": opts})
			if r.Status != http.StatusOK {
				t.Fatalf("query %q: %d %s", q.text, r.Status, r.Body)
			}
			var res []struct {
				Metadata map[string]any `json:"metadata"`
			}
			r.Decode(t, &res)
			for _, x := range res {
				switch x.Metadata["chunk_id"] {
				case q.a:
					both++
				case q.b:
					both++
					second++
				}
			}
		}
		n := float64(len(qs))
		return both / (2 * n), second / n
	}
	base := map[string]any{"search_mode": "hybrid", "final_top_k": 10}
	hybrid, hybrid2 := recall(base)
	base["use_graph_retrieval"] = true
	withGraph, withGraph2 := recall(base)
	t.Logf("Yuxi docs multi-hop set: %d questions, %d chunks, %d dictionary terms, graph %v entities; Recall@10 hybrid %.3f (second hop %.3f), hybrid+graph %.3f (second hop %.3f)",
		len(qs), len(doc.Chunks), len(dict), st["graph"], hybrid, hybrid2, withGraph, withGraph2)
	if withGraph <= hybrid {
		t.Fatalf("hybrid+graph Recall@10 %.3f does not beat hybrid %.3f", withGraph, hybrid)
	}
}
