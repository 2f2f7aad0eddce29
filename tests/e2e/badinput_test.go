package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func rowCounts(t *testing.T, p *testkit.Local) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"messages", "agent_run_requests", "agent_runs", "conversations", "agents", "tool_calls"} {
		var n int
		if err := p.P.App.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func TestBadInputGetsCodedErrorsAndWritesNothing(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	th := c.Thread()
	before := rowCounts(t, p)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"malformed json", "POST", "/api/agent/runs", `{"query": "hi", `, 400, "invalid_json"},
		{"empty body", "POST", "/api/agent/runs", ``, 400, "invalid_json"},
		{"wrong type", "POST", "/api/agent/runs", `{"query": 5}`, 422, "invalid_request"},
		{"unknown thread", "POST", "/api/agent/runs", map[string]any{"query": "hi", "agent_slug": "default-chatbot", "thread_id": "nope"}, 404, "thread_not_found"},
		{"unknown agent", "POST", "/api/agent/runs", map[string]any{"query": "hi", "agent_slug": "ghost", "thread_id": th}, 404, "agent_not_found"},
		{"empty query", "POST", "/api/agent/runs", map[string]any{"query": " ", "agent_slug": "default-chatbot", "thread_id": th}, 422, "empty_query"},
		{"bad policy", "POST", "/api/agent/runs", map[string]any{"query": "hi", "agent_slug": "default-chatbot", "thread_id": th, "queue_policy": "later"}, 422, "invalid_queue_policy"},
		{"oversized", "POST", "/api/agent/runs", `{"query":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "payload_too_large"},
		{"unknown run", "GET", "/api/agent/runs/run_nope", nil, 404, "run_not_found"},
		{"unknown run result", "GET", "/api/agent/runs/run_nope/result", nil, 404, "run_not_found"},
		{"unknown run cancel", "POST", "/api/agent/runs/run_nope/cancel", nil, 404, "run_not_found"},
		{"unknown run events", "GET", "/api/agent/runs/run_nope/events", nil, 404, "run_not_found"},
		{"unknown request", "GET", "/api/agent/requests/req_nope", nil, 404, "request_not_found"},
		{"unknown thread history", "GET", "/api/chat/thread/nope/history", nil, 404, "thread_not_found"},
		{"unknown agent detail", "GET", "/api/agent/ghost", nil, 404, "agent_not_found"},
		{"thread for unknown agent", "POST", "/api/chat/thread", map[string]any{"agent_id": "ghost"}, 404, "agent_not_found"},
		{"resume without parent", "POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "resume": map[string]any{"q-1": "x"}}, 422, "missing_created_by_run_id"},
		{"resume of unknown run", "POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "resume": map[string]any{"q-1": "x"}, "created_by_run_id": "run_nope"}, 404, "run_not_found"},
		{"bad agent config", "POST", "/api/agent", map[string]any{"name": "x", "config_json": map[string]any{"context": map[string]any{"max_execution_steps": 0}}}, 422, "invalid_context"},
		{"unknown tool in agent", "POST", "/api/agent", map[string]any{"name": "x", "config_json": map[string]any{"context": map[string]any{"tools": []string{"rm_rf"}}}}, 422, "invalid_context"},
		{"unknown route", "GET", "/api/nothing/here", nil, 404, "route_not_found"},
	}
	for _, tc := range cases {
		r := c.Do(tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.Code() != tc.code {
			t.Errorf("%s: want %d %s, got %d %s", tc.name, tc.status, tc.code, r.Status, r.Body)
		}
	}
	if after := rowCounts(t, p); testkit.MustJSON(after) != testkit.MustJSON(before) {
		t.Errorf("bad input changed rows: %v → %v", before, after)
	}
}

func TestCredentialsAreRequiredAndChecked(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	anon := p.Admin.As("")
	for _, path := range []string{"/api/chat/threads", "/api/agent", "/api/agent/runs/x", "/api/user/apikey/"} {
		if r := anon.Do("GET", path, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("%s without token: %d", path, r.Status)
		}
	}
	if r := p.Admin.As("not-a-token").Do("GET", "/api/chat/threads", nil); r.Status != http.StatusUnauthorized || r.Code() != "invalid_token" {
		t.Errorf("garbage token: %d %s", r.Status, r.Body)
	}
	if r := p.Admin.As("yxkey_"+strings.Repeat("0", 48)).Do("GET", "/api/chat/threads", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("unknown api key: %d %s", r.Status, r.Body)
	}
	if r := anon.Do("GET", "/api/system/health", nil); r.Status != http.StatusOK {
		t.Errorf("health must be public: %d", r.Status)
	}
	// An API key works wherever a token does.
	key := p.Admin.OK("POST", "/api/user/apikey/", map[string]any{"request_id": "key-req-0001", "name": "ci"})
	kc := p.Admin.As(key["secret"].(string))
	p.LLM.Enqueue(llmtest.Text("via key"))
	in := kc.Submit(kc.Thread(), "hi", nil)
	if r := testkit.Render(kc.Collect(in["run_id"].(string), 20*time.Second)); strings.Join(r.Texts(), "") != "via key" {
		t.Fatalf("run with api key: %+v", r)
	}
}

func TestAnotherUsersThreadsRunsAndRequestsAreInvisible(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	alice := p.Admin.NewUser("alice")
	bob := p.Admin.NewUser("bob")
	hold := make(chan struct{})
	defer close(hold)
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "a"}}, Block: hold}, llmtest.Text("b"))
	th := alice.Thread()
	first := alice.Submit(th, "mine", nil)
	queued := alice.Submit(th, "also mine", nil)
	runID, reqID := first["run_id"].(string), queued["request_id"].(string)
	before := rowCounts(t, p)
	probes := []struct{ method, path string }{
		{"GET", "/api/chat/thread/" + th + "/history"},
		{"PUT", "/api/chat/thread/" + th},
		{"DELETE", "/api/chat/thread/" + th},
		{"GET", "/api/agent/runs/" + runID},
		{"GET", "/api/agent/runs/" + runID + "/result"},
		{"GET", "/api/agent/runs/" + runID + "/events"},
		{"POST", "/api/agent/runs/" + runID + "/cancel"},
		{"GET", "/api/agent/requests/" + reqID},
		{"GET", "/api/agent/requests/" + reqID + "/events"},
		{"POST", "/api/agent/requests/" + reqID + "/cancel"},
		{"POST", "/api/agent/requests/" + reqID + "/steer"},
		{"GET", "/api/agent/thread/" + th + "/requests"},
		{"POST", "/api/agent/thread/" + th + "/requests/continue"},
		{"GET", "/api/agent/thread/" + th + "/active_run"},
	}
	for _, pr := range probes {
		var body any
		if pr.method == "PUT" {
			body = map[string]any{"title": "pwned"}
		}
		if r := bob.Do(pr.method, pr.path, body); r.Status != http.StatusNotFound {
			t.Errorf("bob %s %s: %d %s", pr.method, pr.path, r.Status, r.Body)
		}
	}
	if r := bob.Do("POST", "/api/agent/runs", map[string]any{"query": "x", "agent_slug": "default-chatbot", "thread_id": th}); r.Status != http.StatusNotFound {
		t.Errorf("bob submits to alice's thread: %d", r.Status)
	}
	if got := bob.OK("GET", "/api/chat/threads", nil); len(got) != 0 {
		t.Errorf("bob lists threads: %v", got)
	}
	if after := rowCounts(t, p); testkit.MustJSON(after) != testkit.MustJSON(before) {
		t.Errorf("bob's attempts changed rows: %v → %v", before, after)
	}
	// Alice still owns everything.
	if r := alice.OK("GET", "/api/agent/runs/"+runID, nil)["run"].(map[string]any); r["status"] == "cancelled" {
		t.Errorf("alice's run was cancelled by bob")
	}
	if req := alice.OK("GET", "/api/agent/requests/"+reqID, nil)["request"].(map[string]any); req["status"] != "queued" {
		t.Errorf("alice's request changed: %v", req)
	}
}
