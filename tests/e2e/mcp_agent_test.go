package e2e

// MCP servers end to end against the reference server nobody here wrote
// (@modelcontextprotocol/server-everything over streamable HTTP): an admin
// configures it (headers sealed, never returned; users see a redacted
// list; stdio and private URLs refused), an agent whose context.mcps names
// it calls one of its tools through tool-invoke, the run's tools are fixed
// in its manifest, and a server that dies mid-call gives a clear tool error
// while the run goes on.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/mcpeverything"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestMCPServerToolThroughToolInvoke(t *testing.T) {
	t.Parallel()
	srv := mcpeverything.StartT(t)
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"})
	admin := p.Admin
	const secretHeader = "s3cret-header-value"

	created := admin.OK("POST", "/api/system/mcp-servers", map[string]any{"name": "Everything", "slug": "everything",
		"transport": "streamable_http", "url": srv.URL, "headers": map[string]string{"X-Test-Token": secretHeader},
		"tags": []string{"test"}, "description": "reference server"})
	raw, _ := json.Marshal(created)
	if strings.Contains(string(raw), secretHeader) {
		t.Fatalf("create answered the header value: %s", raw)
	}
	data, _ := created["data"].(map[string]any)
	if data["slug"] != "everything" || data["url"] != srv.URL || fmt.Sprint(data["header_names"]) != "[X-Test-Token]" {
		t.Errorf("created: %v", data)
	}
	var sealed string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT headers_sealed FROM mcp_servers WHERE slug='everything'`).Scan(&sealed); err != nil ||
		sealed == "" || strings.Contains(sealed, secretHeader) {
		t.Errorf("headers at rest: %q %v", sealed, err)
	}

	// Refused inputs: stdio, a command, a metadata URL, bad transport, duplicates.
	for name, tc := range map[string]struct {
		body   map[string]any
		status int
		code   string
	}{
		"stdio":     {map[string]any{"name": "x", "transport": "stdio", "command": "sh", "args": []string{"-c", "id"}}, 422, "stdio_not_allowed"},
		"command":   {map[string]any{"name": "x", "transport": "streamable_http", "url": srv.URL, "command": "sh"}, 422, "stdio_not_allowed"},
		"metadata":  {map[string]any{"name": "x", "transport": "sse", "url": "http://169.254.169.254/latest/"}, 422, "outbound_denied"},
		"decimal":   {map[string]any{"name": "x", "transport": "sse", "url": "http://2852039166/"}, 422, "outbound_denied"},
		"transport": {map[string]any{"name": "x", "transport": "websocket", "url": srv.URL}, 400, "invalid_transport"},
		"no url":    {map[string]any{"name": "x", "transport": "sse"}, 400, "invalid_url"},
		"duplicate": {map[string]any{"name": "Everything", "slug": "everything", "transport": "sse", "url": srv.URL}, 409, "mcp_server_exists"},
	} {
		r := admin.Do("POST", "/api/system/mcp-servers", tc.body)
		if r.Status != tc.status || r.Code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.Status, r.Code(), tc.status, tc.code)
		}
	}

	// Tools: listed from the server, cached by config hash, toggled.
	tools := admin.OK("GET", "/api/system/mcp-servers/everything/tools", nil)
	names := map[string]bool{}
	for _, x := range tools["data"].([]any) {
		names[x.(map[string]any)["name"].(string)] = true
	}
	if !names["get-sum"] || !names["echo"] || !names["get-tiny-image"] {
		t.Fatalf("tools of server-everything: %v", names)
	}
	if tg := admin.OK("PUT", "/api/system/mcp-servers/everything/tools/get-tiny-image/toggle", nil); tg["enabled"] != false {
		t.Errorf("toggle: %v", tg)
	}
	if rf := admin.OK("POST", "/api/system/mcp-servers/everything/tools/refresh", nil); rf["disabled_count"] != float64(1) {
		t.Errorf("refresh: %v", rf)
	}
	if ts := admin.OK("POST", "/api/system/mcp-servers/everything/test", nil); ts["tool_count"].(float64) < 3 {
		t.Errorf("test: %v", ts)
	}

	// A plain user sees the redacted list and may not administer.
	alice := admin.NewUser("alice")
	list := alice.OK("GET", "/api/system/mcp-servers", nil)
	lraw, _ := json.Marshal(list)
	if strings.Contains(string(lraw), srv.URL) || strings.Contains(string(lraw), "header") || !strings.Contains(string(lraw), `"everything"`) {
		t.Errorf("user's list is not redacted: %s", lraw)
	}
	for _, rt := range [][2]string{{"GET", "/api/system/mcp-servers/everything"}, {"GET", "/api/system/mcp-servers/everything/tools"},
		{"POST", "/api/system/mcp-servers/everything/test"}, {"DELETE", "/api/system/mcp-servers/everything"}} {
		if r := alice.Do(rt[0], rt[1], nil); r.Status != http.StatusForbidden {
			t.Errorf("user %s %s: %d", rt[0], rt[1], r.Status)
		}
	}

	// The agent calls get-sum through tool-invoke.
	alice.OK("POST", "/api/agent", map[string]any{"name": "MCP helper", "slug": "mcp-helper",
		"config_json": map[string]any{"context": map[string]any{"mcps": []string{"everything"}}}})
	const question = "What is 2 + 3? Use the MCP tool."
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" {
			return llmtest.Calls(llmtest.ToolCall{ID: "call_sum", Name: "mcp__everything__get-sum", Arguments: `{"a":2,"b":3}`})
		}
		return llmtest.Text("The tool said: " + last.Content)
	})
	th := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "mcp-helper", "title": "mcp"})["id"].(string)
	runID := alice.OK("POST", "/api/agent/runs", map[string]any{"query": question, "agent_slug": "mcp-helper", "thread_id": th})["run_id"].(string)
	r := testkit.Render(alice.Collect(runID, 60*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	reqs := modelRequestsFor(t, p, question)
	if len(reqs) != 2 {
		t.Fatalf("model turns: %d", len(reqs))
	}
	offered := offeredToolNames(reqs[0].Tools)
	if !contains(offered, "mcp__everything__get-sum") || !contains(offered, "mcp__everything__echo") || contains(offered, "mcp__everything__get-tiny-image") {
		t.Errorf("offered tools: %v", offered)
	}
	if got := testkit.ToolMessages(reqs[1])["call_sum"]; !strings.Contains(got, "5") || strings.HasPrefix(got, "Error") {
		t.Errorf("get-sum result the model read: %q", got)
	}
	var manifest struct {
		Tools []struct {
			Name        string `json:"name"`
			Layer       string `json:"layer"`
			ContentHash string `json:"content_hash"`
		} `json:"tools"`
		MCPs []struct {
			Slug       string `json:"slug"`
			ConfigHash string `json:"config_hash"`
			Tools      int    `json:"tools"`
		} `json:"mcps"`
	}
	var mraw []byte
	var fp string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT manifest, fingerprint FROM run_tool_manifests WHERE run_id=$1`, runID).Scan(&mraw, &fp); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	_ = json.Unmarshal(mraw, &manifest)
	if len(manifest.MCPs) != 1 || manifest.MCPs[0].Slug != "everything" || manifest.MCPs[0].ConfigHash == "" || manifest.MCPs[0].Tools < 2 || len(fp) != 64 {
		t.Errorf("manifest servers: %s", mraw)
	}
	for _, mt := range manifest.Tools {
		if len(mt.ContentHash) != 64 {
			t.Errorf("manifest tool without content hash: %+v", mt)
		}
	}
	var status, output string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT status, coalesce(tool_output,'') FROM tool_calls WHERE run_id=$1 AND tool_call_id='call_sum'`,
		runID).Scan(&status, &output); err != nil || status != "success" || !strings.Contains(output, "5") {
		t.Errorf("tool call row: %s %q %v", status, output, err)
	}

	// Disabling the server re-checks at the point of effect: a later run
	// does not see its tools.
	admin.OK("PUT", "/api/system/mcp-servers/everything/status", map[string]any{"enabled": false})
	const q2 = "Anything from MCP now?"
	runID2 := alice.OK("POST", "/api/agent/runs", map[string]any{"query": q2, "agent_slug": "mcp-helper", "thread_id": th})["run_id"].(string)
	alice.Collect(runID2, 60*time.Second)
	if off := offeredToolNames(modelRequestsFor(t, p, q2)[0].Tools); contains(off, "mcp__everything__get-sum") {
		t.Errorf("a disabled server's tools were offered: %v", off)
	}
	admin.OK("DELETE", "/api/system/mcp-servers/everything", nil)
	if r := admin.Do("GET", "/api/system/mcp-servers/everything", nil); r.Status != 404 || r.Code() != "mcp_server_not_found" {
		t.Errorf("after delete: %d %s", r.Status, r.Code())
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// killingProxy forwards to an MCP server and SIGKILLs it as soon as a
// tools/call request has been written to it: the server dies mid-call.
func killingProxy(t *testing.T, srv *mcpeverything.Server) string {
	target, _ := url.Parse(srv.URL)
	var once sync.Once
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			rp.ServeHTTP(&killOnWrite{ResponseWriter: w, kill: func() { once.Do(srv.Kill) }}, r)
			return
		}
		rp.ServeHTTP(w, r)
	})
	ps := httptest.NewServer(h)
	t.Cleanup(ps.Close)
	return ps.URL + target.Path
}

// killOnWrite kills the server when the upstream answers the call's
// response headers (the call is then running on the server) — before any
// result is forwarded.
type killOnWrite struct {
	http.ResponseWriter
	kill func()
}

func (k *killOnWrite) WriteHeader(code int) {
	k.kill()
	k.ResponseWriter.WriteHeader(code)
}

func TestMCPServerDyingMidCallIsAToolError(t *testing.T) {
	t.Parallel()
	srv := mcpeverything.StartT(t)
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"})
	proxied := killingProxy(t, srv)
	p.Admin.OK("POST", "/api/system/mcp-servers", map[string]any{"name": "Dying", "slug": "dying", "transport": "streamable_http", "url": proxied})
	alice := p.Admin.NewUser("alice")
	alice.OK("POST", "/api/agent", map[string]any{"name": "Dying helper", "slug": "dying-helper",
		"config_json": map[string]any{"context": map[string]any{"mcps": []string{"dying"}}}})
	const question = "Run the long operation."
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" {
			return llmtest.Calls(llmtest.ToolCall{ID: "call_long", Name: "mcp__dying__trigger-long-running-operation", Arguments: `{"duration":30,"steps":30}`})
		}
		return llmtest.Text("The server failed; I carry on without it.")
	})
	th := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "dying-helper", "title": "dying"})["id"].(string)
	runID := alice.OK("POST", "/api/agent/runs", map[string]any{"query": question, "agent_slug": "dying-helper", "thread_id": th})["run_id"].(string)
	r := testkit.Render(alice.Collect(runID, 60*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("the run did not go on: %+v", r)
	}
	reqs := modelRequestsFor(t, p, question)
	got := testkit.ToolMessages(reqs[len(reqs)-1])["call_long"]
	if !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, `MCP server "dying"`) || !strings.Contains(got, "trigger-long-running-operation") {
		t.Errorf("tool error the model read: %q", got)
	}
	var status string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT status FROM tool_calls WHERE run_id=$1 AND tool_call_id='call_long'`, runID).Scan(&status); err != nil || status != "error" {
		t.Errorf("tool call row: %s %v", status, err)
	}
}
