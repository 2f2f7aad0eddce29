package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
)

// A tool-invoke process resolves a run's MCP tool with the server's
// configuration read in the same round trip (or from its cached, write-once
// manifest), and the check where the effect happens still sees the server
// disabled or deleted after the run started.
func TestResolveReadsTheServerWithTheManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := runtest.New(t)
	fx := mcpfixture.Start(t)
	keys := secrettest.Ring(t, "resolve-test-key-0123456789abcdef0123456789")
	open := func() *mcp.Toolset { // a process of its own: empty caches
		ts := mcp.Open(f.Pool, keys, mcpfixture.OpenGuard{}, nil)
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

// Lookup reads what Resolve reads inside the statement that loads the tool
// call (tool-invoke's one round trip for the call, its run and its MCP tool)
// and resolves exactly as Resolve: the tool of the run's manifest with its
// server's current row (headers opened), nothing for a name outside the
// manifest, of another server or not an MCP tool's, and a server disabled
// or deleted after the run started is still caught where the effect happens.
func TestLookupResolvesWithTheCallsLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := runtest.New(t)
	fx := mcpfixture.Start(t)
	keys := secrettest.Ring(t, "resolve-test-key-0123456789abcdef0123456789")
	ts := mcp.Open(f.Pool, keys, mcpfixture.OpenGuard{}, nil)
	t.Cleanup(ts.Pool().Close)
	name, transport := "fx", "streamable_http"
	if _, err := ts.Store().Create(ctx, mcp.Input{Name: &name, Transport: &transport, URL: &fx.URL, Headers: map[string]string{"X-Test": "sealed-1"}}, "adm"); err != nil {
		t.Fatal(err)
	}
	in := f.MustSubmit(f.User("alice"), f.Thread("alice"), "hi", "")
	runID := *in.RunID
	if _, err := ts.Manifest(ctx, runID, []string{"fx"}, nil); err != nil {
		t.Fatal(err)
	}
	names := []string{"mcp__fx__add", "mcp__fx__nope", "mcp__other__add", "read_file"}
	c, err := f.Runs.Claim(ctx, runID, 1, "w", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	var calls []run.NewToolCall
	for i, n := range names {
		calls = append(calls, run.NewToolCall{ID: fmt.Sprintf("c%d", i), Name: n, Arguments: `{"a":2,"b":3}`})
	}
	if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), ToolCalls: calls}); err != nil {
		t.Fatal(err)
	}
	invoke := mcp.Open(f.Pool, keys, mcpfixture.OpenGuard{}, nil) // a tool-invoke process of its own: nothing cached
	t.Cleanup(invoke.Pool().Close)
	lookup := func(i int) (tool.Result, bool) {
		t.Helper()
		sql, dest, resolve := invoke.Lookup()
		tc, r, err := f.Runs.GetToolCallAndRunWith(ctx, runID, fmt.Sprintf("c%d", i), run.Joined{SQL: sql, Dest: dest})
		if err != nil {
			t.Fatalf("load call %d: %v", i, err)
		}
		if tc.Name != names[i] || r.ID != runID {
			t.Fatalf("loaded %q of %s", tc.Name, r.ID)
		}
		tl, ok, err := resolve(tc.Name)
		if err != nil {
			t.Fatalf("resolve %s: %v", tc.Name, err)
		}
		if !ok {
			return tool.Result{}, false
		}
		if tl.Spec().Name != tc.Name {
			t.Errorf("resolved %s as %s", tc.Name, tl.Spec().Name)
		}
		res, err := tl.Invoke(ctx, tool.Call{RunID: runID, ToolCallID: tc.ToolCallID, Arguments: tc.Input})
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return res, true
	}
	if res, ok := lookup(0); !ok || res.IsError || res.Output != "The sum of 2 and 3 is 5." {
		t.Fatalf("call: %+v %v", res, ok)
	}
	if h, _ := fx.Header.Load().(string); h != "sealed-1" {
		t.Errorf("the server got X-Test %q, want the configured header", h)
	}
	for i := 1; i < len(names); i++ {
		if res, ok := lookup(i); ok {
			t.Errorf("%s resolved: %+v", names[i], res)
		}
	}
	// GetToolCallAndRun without a Joined still loads the call alone.
	if tc, _, err := f.Runs.GetToolCallAndRun(ctx, runID, "c0"); err != nil || tc.Name != names[0] {
		t.Fatalf("plain load: %+v %v", tc, err)
	}
	if _, err := ts.Store().SetEnabled(ctx, "fx", false, "adm"); err != nil {
		t.Fatal(err)
	}
	if res, ok := lookup(0); !ok || !res.IsError || !strings.Contains(res.Output, `MCP server "fx" is disabled`) {
		t.Errorf("disabled server: %+v %v", res, ok)
	}
	if err := ts.Store().Delete(ctx, "fx"); err != nil {
		t.Fatal(err)
	}
	if res, ok := lookup(0); !ok || !res.IsError || !strings.Contains(res.Output, "no longer configured") {
		t.Errorf("deleted server: %+v %v", res, ok)
	}
	if n := fx.Calls.Load(); n != 1 {
		t.Errorf("the server served %d calls, want 1", n)
	}
}
