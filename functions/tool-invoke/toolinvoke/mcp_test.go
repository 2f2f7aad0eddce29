package toolinvoke_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/secret/secrettest"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
)

// readCountingTools is the MCP layer, counting the reads of its own that
// resolving a tool takes (Resolve); its Lookup rides along the call's load.
type readCountingTools struct {
	*mcp.Toolset
	resolves atomic.Int32
}

func (c *readCountingTools) Resolve(ctx context.Context, runID, name string) (tool.Tool, bool, error) {
	c.resolves.Add(1)
	return c.Toolset.Resolve(ctx, runID, name)
}

// An MCP tool call is resolved from the statement that loads the call (the
// tool's manifest entry and its server's current row), not by a read of its
// own: it runs on the server, its result and events are recorded; a tool
// the administrator disabled after the run started is refused where the
// effect happens, from that same read.
func TestAnMCPCallIsResolvedWithTheCallsLoad(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	fx := mcpfixture.Start(t)
	keys := secrettest.Ring(t, "toolinvoke-test-key-0123456789abcdef012345")
	f := runtest.NewStreamed(t)
	step := mcp.Open(f.Pool, keys, mcpfixture.OpenGuard{}, nil) // agent-step's layer: records the manifest
	t.Cleanup(step.Pool().Close)
	name, transport := "fx", "streamable_http"
	if _, err := step.Store().Create(ctx, mcp.Input{Name: &name, Transport: &transport, URL: &fx.URL}, "adm"); err != nil {
		t.Fatal(err)
	}
	rt := &readCountingTools{Toolset: mcp.Open(f.Pool, keys, mcpfixture.OpenGuard{}, nil)}
	t.Cleanup(rt.Pool().Close)
	e := env{Fixture: f, h: toolinvoke.New(f.Runs, tool.NewRegistry(), f.Stream, toolinvoke.Config{RunTools: rt}, nil)}
	id, calls := e.stepWithCalls([2]string{"mcp__fx__add", `{"a":2,"b":3}`}, [2]string{"mcp__fx__echo", `{"text":"hi"}`})
	if _, err := step.Manifest(ctx, id, []string{"fx"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Handle(ctx, calls[0]); err != nil {
		t.Fatal(err)
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolSuccess || str(c.Output) != "The sum of 2 and 3 is 5." {
		t.Errorf("call_0 row = %s %s", c.Status, str(c.Output))
	}
	if e.toolEvents(id, "call_0", runstream.ToolStarted) != 1 || e.toolEvents(id, "call_0", runstream.ToolFinished) != 1 {
		t.Errorf("call_0 must stream one started and one finished event: %+v", e.stream(id))
	}
	if _, err := step.Store().ToggleTool(ctx, "fx", "echo", "adm"); err != nil {
		t.Fatal(err)
	}
	if err := e.h.Handle(ctx, calls[1]); err != nil {
		t.Fatal(err)
	}
	if c := e.call(id, "call_1"); c.Status != run.ToolError || !strings.Contains(str(c.Error), `tool "echo" of MCP server "fx" is disabled`) {
		t.Errorf("call_1 row = %s %s", c.Status, str(c.Error))
	}
	if n := fx.Calls.Load(); n != 1 {
		t.Errorf("the server served %d calls, want 1", n)
	}
	if n := rt.resolves.Load(); n != 0 {
		t.Errorf("resolving took %d reads of their own, want 0", n)
	}
	if n := e.nextSteps(id); n != 1 {
		t.Errorf("step.ready for step 2 rows = %d, want 1", n)
	}
}
