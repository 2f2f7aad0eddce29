package mcp_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
)

// openGuard lets the test reach its loopback fixture server.
type openGuard struct{}

func (openGuard) CheckURL(context.Context, *url.URL) error { return nil }
func (openGuard) Client() *http.Client                     { return &http.Client{} }

// A tool-invoke process resolves a run's MCP tool with the server's
// configuration read in the same round trip (or from its cached, write-once
// manifest), and the check where the effect happens still sees the server
// disabled or deleted after the run started.
func TestResolveReadsTheServerWithTheManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := runtest.New(t)
	fx := mcpfixture.Start(t)
	keys, err := secret.New("resolve-test-key-0123456789abcdef0123456789")
	if err != nil {
		t.Fatal(err)
	}
	open := func() *mcp.Toolset { // a process of its own: empty caches
		ts := mcp.Open(f.Pool, keys, openGuard{}, nil)
		t.Cleanup(ts.Pool().Close)
		return ts
	}
	step := open()
	name, transport := "fx", "streamable_http"
	if _, err := step.Store().Create(ctx, mcp.Input{Name: &name, Transport: &transport, URL: &fx.URL, Headers: map[string]string{"X-Test": "1"}}, "adm"); err != nil {
		t.Fatal(err)
	}
	in := f.MustSubmit(f.User("alice"), f.Thread("alice"), "hi", "")
	runID := *in.RunID
	if _, err := step.Manifest(ctx, runID, []string{"fx"}, nil); err != nil {
		t.Fatal(err)
	}
	call := func(ts *mcp.Toolset, toolName string) (tool.Result, bool) {
		t.Helper()
		tl, ok, err := ts.Resolve(ctx, runID, toolName)
		if err != nil {
			t.Fatalf("resolve %s: %v", toolName, err)
		}
		if !ok {
			return tool.Result{}, false
		}
		res, err := tl.Invoke(ctx, tool.Call{RunID: runID, ToolCallID: "c", Arguments: `{"a":2,"b":3}`})
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return res, true
	}
	invoke := open()
	for i := 0; i < 2; i++ { // uncached, then from the cached manifest
		if res, ok := call(invoke, "mcp__fx__add"); !ok || res.IsError || res.Output != "The sum of 2 and 3 is 5." {
			t.Fatalf("call %d: %+v %v", i, res, ok)
		}
	}
	if n := fx.Calls.Load(); n != 2 {
		t.Errorf("the server served %d calls, want 2", n)
	}
	if _, ok := call(invoke, "mcp__fx__nope"); ok {
		t.Error("a tool outside the manifest resolved")
	}
	if _, ok := call(open(), "mcp__other__add"); ok {
		t.Error("a tool of another server resolved")
	}
	if _, err := step.Store().SetEnabled(ctx, "fx", false, "adm"); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []*mcp.Toolset{invoke, open()} {
		if res, ok := call(ts, "mcp__fx__add"); !ok || !res.IsError || !strings.Contains(res.Output, `MCP server "fx" is disabled`) {
			t.Errorf("disabled server: %+v %v", res, ok)
		}
	}
	if err := step.Store().Delete(ctx, "fx"); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []*mcp.Toolset{invoke, open()} {
		if res, ok := call(ts, "mcp__fx__add"); !ok || !res.IsError || !strings.Contains(res.Output, "no longer configured") {
			t.Errorf("deleted server: %+v %v", res, ok)
		}
	}
	if n := fx.Calls.Load(); n != 2 {
		t.Errorf("a disabled or deleted server was called: %d calls", n)
	}
}
