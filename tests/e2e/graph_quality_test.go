package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// multiHop is the quality check's multi-hop set: 20 invented companies, each
// based in its own city, with 3 employees each (60 people). A question asks
// for the city of a person's employer; its evidence is two chunks linked
// only through the company: "… <person> works at <company> …" and "… company
// <company> is based in <city> …". The question names the person, not the
// company, so the second chunk shares only template words ("based", "city"
// does not even occur) with it; 20 company chunks compete for them.
// Generated deterministically (no randomness, no network): names are the
// cross product of fixed lists, each fact one line of at least 16 tokens so
// that every line is its own chunk (chunk_token_num 16).
type multiHop struct {
	people, companies string               // the two documents
	questions         []multiHopQuestion   // one per person
	gold              map[string][2]string // question → evidence lines (substrings)
}

type multiHopQuestion struct{ text, person, company string }

func buildMultiHop() multiHop {
	first := []string{"Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kaia", "Lucas"}
	last := []string{"Martin", "Okafor", "Lindqvist", "Moreau", "Tanaka"}
	companies := []string{"Zephyr Labs", "Quartz Dynamics", "Nimbus Works", "Helix Forge", "Orbit Foods", "Cobalt Mills", "Lumen Tiles",
		"Vertex Gears", "Amber Looms", "Sable Optics", "Tundra Paper", "Iris Motors", "Delta Inks", "Mosaic Glass", "Pylon Steel",
		"Willow Yarns", "Ember Salts", "Granite Toys", "Harbor Clocks", "Falcon Soap"}
	cities := []string{"Oslo", "Porto", "Tallinn", "Lyon", "Graz", "Ghent", "Bergen", "Malmo", "Turin", "Krakow", "Leeds", "Basel",
		"Utrecht", "Bilbao", "Aarhus", "Dresden", "Split", "Brno", "Cork", "Riga"}
	var mh multiHop
	mh.gold = map[string][2]string{}
	var ppl, cos []string
	for i, co := range companies {
		cos = append(cos, fmt.Sprintf("The company %s is based in %s and runs all of its daily operations from one single office there.", co, cities[i]))
	}
	for i := 0; i < 60; i++ {
		person := first[i%len(first)] + " " + last[i/len(first)]
		co := companies[(i*7)%len(companies)]
		ppl = append(ppl, fmt.Sprintf("The engineer %s works at %s and has been a member of its staff for many years now.", person, co))
		q := fmt.Sprintf("Which city is %s's employer based in?", person)
		mh.questions = append(mh.questions, multiHopQuestion{text: q, person: person, company: co})
		mh.gold[q] = [2]string{"engineer " + person + " works at", "company " + co + " is based"}
	}
	mh.people, mh.companies = strings.Join(ppl, "\n")+"\n", strings.Join(cos, "\n")+"\n"
	return mh
}

// The quality check of graph retrieval: on the multi-hop set, hybrid search
// with graph retrieval (graph built by kb-graph with the scripted extractor
// over the deterministic annotator of testkit.ExtractGraph) beats hybrid
// search alone on Recall@10 (both evidence chunks counted).
func TestGraphRetrievalBeatsHybridOnMultiHop(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	testkit.ScriptedExtractor(p.LLM, nil)
	c := p.Admin
	kbID, _ := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "multi-hop", "description": "quality check",
		"additional_params": map[string]any{"chunk_parser_config": map[string]any{"chunk_token_num": 16}}})["kb_id"].(string)
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}, "concurrency": 4})
	mh := buildMultiHop()
	c.Ingest(kbID, map[string][]byte{"people.md": []byte(mh.people), "companies.md": []byte(mh.companies)}, 120*time.Second)
	st := c.WaitGraphBuilt(kbID, 120*time.Second)
	if st["total_chunks"] != float64(80) {
		t.Fatalf("the set should be 80 chunks (one per line): %v", st)
	}

	// recall returns Recall@10 over both evidence chunks, and over the
	// second hop (the company's chunk) alone.
	recall := func(opts map[string]any) (float64, float64) {
		found, second := 0, 0
		for _, q := range mh.questions {
			r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query-test", map[string]any{"query": q.text, "meta": opts})
			if r.Status != http.StatusOK {
				t.Fatalf("query %q: %d %s", q.text, r.Status, r.Body)
			}
			var res []struct {
				Content string `json:"content"`
			}
			r.Decode(t, &res)
			for i, g := range mh.gold[q.text] {
				for _, x := range res {
					if strings.Contains(x.Content, g) {
						found++
						second += i
						break
					}
				}
			}
		}
		n := float64(len(mh.questions))
		return float64(found) / (2 * n), float64(second) / n
	}
	base := map[string]any{"search_mode": "hybrid", "final_top_k": 10}
	hybrid, hybrid2 := recall(base)
	base["use_graph_retrieval"] = true
	withGraph, withGraph2 := recall(base)
	t.Logf("multi-hop set: %d questions, 80 chunks; Recall@10 hybrid %.3f (second hop %.3f), hybrid+graph %.3f (second hop %.3f)",
		len(mh.questions), hybrid, hybrid2, withGraph, withGraph2)
	// A margin, not just "better": the graph must find most second hops.
	if withGraph < hybrid+0.15 {
		t.Fatalf("hybrid+graph Recall@10 %.3f does not beat hybrid %.3f by 0.15", withGraph, hybrid)
	}
}
