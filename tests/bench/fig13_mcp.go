package main

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
	"github.com/yuxi-serverless/yuxi/tests/mcpeverything"
)

// Figure 13: one MCP tool call through tool-invoke against the same call
// made directly with the SDK on a connected session.
const (
	mcpWarm   = 20
	mcpTimed  = 200
	mcpTarget = 1.5 // p50 ≤ 1.5× the direct call
)

func figMCP(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[13] MCP call round trip through tool-invoke",
		"toolinvoke.Handle of one pending call of get-sum on @modelcontextprotocol/server-everything (streamable HTTP, "+
			"loopback): load the call and run with the tool's manifest entry and the server's current row (one statement; "+
			"the handler's own MCP layer, as a tool-invoke process of its own, so nothing is cached), re-check the server, call it on the "+
			"pooled session, record the result and ready the next step (the relay then appends the result's stream events and "+
			"publishes step.ready, untimed, before the floor's call); floor: the same CallTool with the Go SDK on a "+
			"connected session, timed alternately")
	srv, err := mcpeverything.Start(ctx)
	if err != nil {
		return fmt.Errorf("%w (make mcp-test-deps installs it)", err)
	}
	defer srv.Kill()
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	penv := e.platformEnv(db, prefix)
	penv["YUXI_OUTBOUND_ALLOW"] = "127.0.0.1/32"
	penv["YUXI_ENCRYPTION_KEY"] = "bench-encryption-key-0123456789abcdef0123"
	cfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		return err
	}
	rec := &stepRecorder{ready: map[string]events.StepReady{}}
	app, err := openApp(ctx, cfg, bootstrap.Options{Function: "tool-invoke", Publisher: rec})
	if err != nil {
		return err
	}
	defer app.Close()
	ts := mcplayer.Open(app.Core)
	name, transport := "bench", "streamable_http"
	if _, err := ts.Store().Create(ctx, mcp.Input{Name: &name, Transport: &transport, URL: &srv.URL}, "bench"); err != nil {
		return err
	}
	steps, err := createRuns(ctx, app, rec, mcpWarm+mcpTimed)
	if err != nil {
		return err
	}
	tool := mcp.ToolName("bench", "get-sum")
	calls := make([]events.ToolCallRequested, 0, len(steps))
	for _, s := range steps {
		c, err := app.Runs.Claim(ctx, s.RunID, 1, "bench-step", time.Minute)
		if err != nil || c.Outcome != runs.Claimed {
			return fmt.Errorf("claim %s: %v", s.RunID, err)
		}
		if _, err := ts.Manifest(ctx, s.RunID, []string{"bench"}, nil); err != nil {
			return err
		}
		res, err := app.Runs.CommitStep(ctx, runs.StepCommit{Run: c.Run, StepNo: 1, Owner: runs.Owner{Worker: "bench-step", Attempt: c.Attempt},
			StartedAt: time.Now(), ToolCalls: []runs.NewToolCall{{ID: "call_sum", Name: tool, Arguments: `{"a":2,"b":3}`}}, StreamMessageID: "m"})
		if err != nil || res.Outcome != runs.OutcomeTools {
			return fmt.Errorf("commit step of %s: %+v %v", s.RunID, res, err)
		}
		calls = append(calls, events.ToolCallRequested{RunID: s.RunID, ThreadID: s.ThreadID, StepNo: 1, ToolCallID: "call_sum"})
	}
	// tool-invoke runs apart from agent-step, which recorded the manifests:
	// its MCP layer has its own (empty) caches.
	h := toolinvoke.New(app.Runs, app.Tools, app.Stream, toolinvoke.Config{Timeout: time.Minute, RunTools: mcplayer.Open(app.Core)}, app.Log)

	direct := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	sess, err := direct.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	defer sess.Close()

	e.Progress("figure 13: timing %d MCP calls through tool-invoke against %d direct calls", mcpTimed, mcpTimed)
	var ours, floor benchkit.Samples
	for i, c := range calls {
		t0 := time.Now()
		if err := h.Handle(ctx, c); err != nil {
			return fmt.Errorf("tool call of run %s: %w", c.RunID, err)
		}
		d := time.Since(t0)
		// The relay appends the result's stream events, then publishes
		// step.ready, after Handle returned: let it finish (untimed) so
		// that it does not run during the floor's call.
		app.Relay.Wait()
		t1 := time.Now()
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 3}})
		if err != nil || res.IsError {
			return fmt.Errorf("direct call: %v", err)
		}
		fd := time.Since(t1)
		if i >= mcpWarm {
			ours, floor = append(ours, d), append(floor, fd)
		}
	}
	var ok int
	if err := app.Pool.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE status = 'success' AND tool_output LIKE '%5%'`).Scan(&ok); err != nil {
		return err
	}
	if ok != len(calls) {
		return fmt.Errorf("%d of %d MCP calls recorded a successful result", ok, len(calls))
	}
	p50, f50 := ours.P50(), floor.P50()
	ratio := benchkit.DurRatio(p50, f50)
	r.Line("mcp_call_p50", benchkit.Ms(p50), benchkit.X(ratio)+" vs direct SDK call "+benchkit.Ms(f50), fmt.Sprintf("≤ %.1f×", mcpTarget), ratio <= mcpTarget)
	r.Line("mcp_call_p99", benchkit.Ms(ours.P99()), benchkit.X(benchkit.DurRatio(ours.P99(), floor.P99()))+" vs direct "+benchkit.Ms(floor.P99()), "", false)
	r.Detail("%d timed calls each way, alternating; every call's result recorded", mcpTimed)
	return nil
}
