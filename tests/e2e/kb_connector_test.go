package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// fakeDify is Dify's dataset retrieve API (POST /v1/datasets/{id}/retrieve)
// for dataset "ds-1" and API key "dify-secret-key": it checks the bearer
// token and the request body and answers two segments.
func fakeDify(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/datasets/ds-1/retrieve" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"not_found"}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer dify-secret-key" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","message":"Access token is invalid"}`))
			return
		}
		var body struct {
			Query string `json:"query"`
			RM    struct {
				SearchMethod string `json:"search_method"`
				TopK         int    `json:"top_k"`
			} `json:"retrieval_model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Query == "" || body.RM.TopK <= 0 || body.RM.SearchMethod == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"code":"invalid_param","message":"%v %+v"}`, err, body)
			return
		}
		fmt.Fprintf(w, `{"query":{"content":%q},"records":[
			{"segment":{"id":"seg-1","position":1,"document_id":"doc-1","content":"Yuxi answers with %s.","document":{"id":"doc-1","name":"manual.pdf"}},"score":0.91},
			{"segment":{"id":"seg-2","position":2,"document_id":"doc-2","content":"Second segment.","document":{"id":"doc-2","name":"faq.md"}},"score":0.42}]}`,
			body.Query, body.RM.SearchMethod)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// A Dify knowledge base: created from its connection parameters (the token
// sealed at rest, never returned), queried through the query-test route and
// the agent's query_kb in the native result shape, a wrong key answers a
// clear 422, and every document route answers 422 kb_read_only.
func TestDifyConnector(t *testing.T) {
	t.Parallel()
	dify, calls := fakeDify(t)
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"})
	c := p.Admin

	// Missing and invalid parameters are refused before anything is stored.
	for _, tc := range []struct {
		params map[string]any
		code   string
	}{
		{map[string]any{"dify_api_url": dify.URL + "/v1", "dify_dataset_id": "ds-1"}, "missing_connection_param"},
		{map[string]any{"dify_api_url": "ftp://x", "dify_token": "k", "dify_dataset_id": "ds-1"}, "invalid_connection_param"},
	} {
		r := c.Do("POST", "/api/knowledge/databases", map[string]any{"database_name": "bad dify", "kb_type": "dify", "additional_params": tc.params})
		if r.Status != http.StatusUnprocessableEntity || r.Code() != tc.code {
			t.Fatalf("create with %v: %d %s, want 422 %s", tc.params, r.Status, r.Body, tc.code)
		}
	}

	created := c.Do("POST", "/api/knowledge/databases", map[string]any{"database_name": "Dify docs", "kb_type": "dify",
		"share_config":      testkit.GlobalReadShare(),
		"additional_params": map[string]any{"api_base_url": dify.URL + "/v1/", "api_key": "dify-secret-key", "dataset_id": "ds-1"}})
	if created.Status != http.StatusOK || strings.Contains(string(created.Body), "dify-secret-key") {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	var k struct {
		KBID string         `json:"kb_id"`
		Type string         `json:"kb_type"`
		Docs bool           `json:"supports_documents"`
		Add  map[string]any `json:"additional_params"`
	}
	created.Decode(t, &k)
	if k.Type != "dify" || k.Docs || k.Add["dify_dataset_id"] != "ds-1" || k.Add["dify_api_url"] != dify.URL+"/v1" || k.Add["dify_token"] != "********" {
		t.Fatalf("created: %+v", k)
	}
	for _, path := range []string{"/api/knowledge/databases", "/api/knowledge/databases/" + k.KBID, "/api/knowledge/types"} {
		r := c.Do("GET", path, nil)
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), "dify-secret-key") {
			t.Fatalf("GET %s: %d, token shown: %s", path, r.Status, r.Body)
		}
	}
	if types := c.Do("GET", "/api/knowledge/types", nil); !strings.Contains(string(types.Body), `"name":"dify_token"`) {
		t.Fatalf("types do not describe the dify create form: %s", types.Body)
	}
	var sealed, add string
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT connector_secret, additional_params::text FROM knowledge_bases WHERE kb_id = $1`,
		k.KBID).Scan(&sealed, &add); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "ys1.") || strings.Contains(sealed, "dify-secret-key") || strings.Contains(add, "dify-secret-key") {
		t.Fatalf("token not sealed at rest: secret %q, params %s", sealed, add)
	}

	// The query-test route: native result shape.
	r := c.Do("POST", "/api/knowledge/databases/"+k.KBID+"/query-test", map[string]any{"query": "how does Yuxi answer", "meta": map[string]any{"search_mode": "hybrid", "final_top_k": 1}})
	if r.Status != http.StatusOK {
		t.Fatalf("query-test: %d %s", r.Status, r.Body)
	}
	var res []struct {
		ID       string         `json:"id"`
		KBID     string         `json:"kb_id"`
		FileID   string         `json:"file_id"`
		Content  string         `json:"content"`
		Score    float64        `json:"score"`
		Metadata map[string]any `json:"metadata"`
	}
	r.Decode(t, &res)
	if len(res) != 1 || res[0].ID != "seg-1" || res[0].KBID != k.KBID || res[0].FileID != "doc-1" || res[0].Content != "Yuxi answers with hybrid_search." ||
		res[0].Score != 0.91 || res[0].Metadata["source"] != "manual.pdf" {
		t.Fatalf("query-test results: %s", r.Body)
	}

	// Read-only: every document route refuses.
	if up := c.Upload(k.KBID, "a.md", []byte("# a\n")); up.Status != http.StatusUnprocessableEntity || up.Code() != "kb_read_only" {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	for _, path := range []string{"/documents", "/documents/parse", "/documents/index"} {
		r := c.Do("POST", "/api/knowledge/databases/"+k.KBID+path, map[string]any{"items": []string{"x"}, "file_ids": []string{"x"}})
		if r.Status != http.StatusUnprocessableEntity || r.Code() != "kb_read_only" {
			t.Fatalf("POST %s: %d %s, want 422 kb_read_only", path, r.Status, r.Body)
		}
	}

	// The agent's query_kb answers from the connector like a native KB.
	c.OK("POST", "/api/agent", map[string]any{"name": "Dify helper", "slug": "dify-helper",
		"config_json": map[string]any{"context": map[string]any{"knowledges": []string{k.KBID}}}})
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.Messages[len(req.Messages)-1].Role != "tool" {
			return llmtest.Calls(llmtest.ToolCall{ID: "call_dify", Name: "query_kb",
				Arguments: fmt.Sprintf(`{"kb_id":%q,"query_text":"how does Yuxi answer"}`, k.KBID)})
		}
		return llmtest.Text("done")
	})
	const question = "How does Yuxi answer, per Dify?"
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "dify-helper", "title": "dify"})["id"].(string)
	in := c.OK("POST", "/api/agent/runs", map[string]any{"query": question, "agent_slug": "dify-helper", "thread_id": th})
	runID, _ := in["run_id"].(string)
	if runID == "" {
		t.Fatalf("intake: %v", in)
	}
	c.Collect(runID, 30*time.Second)
	reqs := modelRequestsFor(t, p, question)
	if len(reqs) < 2 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	if out := testkit.ToolMessages(reqs[1])["call_dify"]; !strings.Contains(out, "Yuxi answers with") || !strings.Contains(out, "manual.pdf") {
		t.Fatalf("query_kb over the Dify KB: %s", out)
	}

	// A wrong key (set through an update; the redaction marker keeps the
	// stored one) answers 422 connector_auth_failed.
	before := calls.Load()
	c.OK("PUT", "/api/knowledge/databases/"+k.KBID, map[string]any{"description": "x", "additional_params": map[string]any{"dify_token": "********"}})
	if r := c.Do("POST", "/api/knowledge/databases/"+k.KBID+"/query-test", map[string]any{"query": "q"}); r.Status != http.StatusOK {
		t.Fatalf("query after a no-op update: %d %s", r.Status, r.Body)
	}
	c.OK("PUT", "/api/knowledge/databases/"+k.KBID, map[string]any{"additional_params": map[string]any{"dify_token": "wrong-key"}})
	r = c.Do("POST", "/api/knowledge/databases/"+k.KBID+"/query-test", map[string]any{"query": "q"})
	if r.Status != http.StatusUnprocessableEntity || r.Code() != "connector_auth_failed" || strings.Contains(string(r.Body), "wrong-key") {
		t.Fatalf("query with a wrong key: %d %s", r.Status, r.Body)
	}
	if calls.Load() != before+2 {
		t.Fatalf("the fake was called %d times, want 2", calls.Load()-before)
	}
}

// A Notion knowledge base answers the query-test route from the pages its
// integration sees (search, then block children), the token never shown.
// A page's text includes nested blocks (has_children, read down to 3
// levels) across paginated children lists (start_cursor/next_cursor). A KB
// configured with a data source (Notion-Version 2025-09-03) queries
// POST /v1/data_sources/{id}/query across its result pages and ranks the
// pages by the query's words in their properties; one configured with a
// database reads the database's data sources first.
func TestNotionConnector(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var dsQueries []map[string]any // bodies of the data-source queries
	page := func(id, title, status string) string {
		return `{"object":"page","id":"` + id + `","url":"https://notion.so/` + id + `","properties":{"Name":{"type":"title","title":[{"plain_text":"` + title +
			`"}]},"Status":{"type":"rich_text","rich_text":[{"plain_text":"` + status + `"}]}}}`
	}
	para := func(id, text string, children bool) string {
		return fmt.Sprintf(`{"object":"block","id":%q,"type":"paragraph","has_children":%t,"paragraph":{"rich_text":[{"plain_text":%q}]}}`, id, children, text)
	}
	notion := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret_notion" || r.Header.Get("Notion-Version") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		cursor := r.URL.Query().Get("start_cursor")
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/search":
			_, _ = w.Write([]byte(`{"results":[{"object":"page","id":"page-1","url":"https://notion.so/page-1","properties":{"Name":{"type":"title","title":[{"plain_text":"Release notes"}]}}}]}`))
		case "GET /v1/blocks/page-1/children":
			// Two result pages; the first holds a toggle with nested children.
			if cursor == "" {
				_, _ = w.Write([]byte(`{"results":[` + para("b1", "Version 2 ships connectors.", false) + `,` +
					`{"object":"block","id":"t1","type":"toggle","has_children":true,"toggle":{"rich_text":[{"plain_text":"Details"}]}},` +
					`{"object":"block","id":"cp","type":"child_page","has_children":true,"child_page":{"title":"Archive"}}` +
					`],"has_more":true,"next_cursor":"c2"}`))
			} else if cursor == "c2" {
				_, _ = w.Write([]byte(`{"results":[` + para("b2", "Upgrade with care.", false) + `],"has_more":false,"next_cursor":null}`))
			} else {
				w.WriteHeader(http.StatusBadRequest)
			}
		case "GET /v1/blocks/t1/children":
			_, _ = w.Write([]byte(`{"results":[` + para("n1", "Nested: Notion data sources.", true) + `],"has_more":false}`))
		case "GET /v1/blocks/n1/children":
			_, _ = w.Write([]byte(`{"results":[` + para("n2", "Depth three.", true) + `],"has_more":false}`))
		case "GET /v1/blocks/n2/children":
			_, _ = w.Write([]byte(`{"results":[` + para("n3", "Depth four is not read.", false) + `],"has_more":false}`))
		case "GET /v1/blocks/cp/children":
			_, _ = w.Write([]byte(`{"results":[` + para("x", "A child page is not entered.", false) + `],"has_more":false}`))
		case "GET /v1/databases/db-1":
			_, _ = w.Write([]byte(`{"object":"database","id":"db-1","data_sources":[{"id":"ds-1","name":"Tasks"}]}`))
		case "POST /v1/data_sources/ds-1/query":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			dsQueries = append(dsQueries, body)
			mu.Unlock()
			if body["start_cursor"] == nil {
				_, _ = w.Write([]byte(`{"object":"list","results":[` + page("row-1", "Buy milk", "open") + `,` + page("row-2", "Write report", "open") +
					`],"has_more":true,"next_cursor":"q2"}`))
			} else {
				_, _ = w.Write([]byte(`{"object":"list","results":[` + page("row-3", "Deploy connectors", "done") + `],"has_more":false,"next_cursor":null}`))
			}
		case "GET /v1/blocks/row-1/children", "GET /v1/blocks/row-2/children":
			_, _ = w.Write([]byte(`{"results":[],"has_more":false}`))
		case "GET /v1/blocks/row-3/children":
			_, _ = w.Write([]byte(`{"results":[` + para("r3", "Roll out the Notion connector.", false) + `],"has_more":false}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(notion.Close)
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"})
	c := p.Admin
	created := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "Notion", "kb_type": "notion",
		"additional_params": map[string]any{"notion_api_url": notion.URL, "notion_token": "secret_notion"}})
	kbID, _ := created["kb_id"].(string)
	if b, _ := json.Marshal(created); kbID == "" || strings.Contains(string(b), "secret_notion") {
		t.Fatalf("create: %s", b)
	}
	r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query-test", map[string]any{"query": "what ships in version 2"})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"content":"Release notes\nVersion 2 ships connectors.\nDetails\nNested: Notion data sources.\nDepth three.\nArchive\nUpgrade with care."`) ||
		!strings.Contains(string(r.Body), `"source":"Release notes"`) {
		t.Fatalf("query-test: %d %s", r.Status, r.Body)
	}
	if up := c.Upload(kbID, "a.md", []byte("# a\n")); up.Status != http.StatusUnprocessableEntity || up.Code() != "kb_read_only" {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}

	// A data source (and a database, through its data sources): every
	// result page read, the page naming the query's words ranked first.
	for _, src := range []map[string]any{{"data_source_id": "ds-1"}, {"notion_database_id": "db-1"}} {
		mu.Lock()
		dsQueries = nil
		mu.Unlock()
		params := map[string]any{"notion_api_url": notion.URL, "notion_token": "secret_notion", "notion_version": "2025-09-03"}
		for k, v := range src {
			params[k] = v
		}
		kb := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": fmt.Sprint("Notion tasks ", src), "kb_type": "notion", "additional_params": params})
		id, _ := kb["kb_id"].(string)
		var res []struct {
			Content  string         `json:"content"`
			Metadata map[string]any `json:"metadata"`
		}
		r := c.Do("POST", "/api/knowledge/databases/"+id+"/query-test", map[string]any{"query": "deploy the connectors", "meta": map[string]any{"final_top_k": 2}})
		if r.Status != http.StatusOK {
			t.Fatalf("query-test %v: %d %s", src, r.Status, r.Body)
		}
		r.Decode(t, &res)
		if len(res) != 2 || res[0].Content != "Deploy connectors\nRoll out the Notion connector." || res[1].Content != "Buy milk" {
			t.Fatalf("data-source query %v: %s", src, r.Body)
		}
		mu.Lock()
		if len(dsQueries) != 2 || dsQueries[0]["page_size"] != 100.0 || dsQueries[1]["start_cursor"] != "q2" {
			t.Fatalf("data-source queries %v: %v", src, dsQueries)
		}
		mu.Unlock()
	}
}
