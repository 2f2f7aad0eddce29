package toolinvoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// testTool is a tool whose behaviour a test scripts; it records every call.
type testTool struct {
	name   string
	invoke func(ctx context.Context, c tool.Call) (tool.Result, error)
	mu     sync.Mutex
	calls  []tool.Call
}

func (tt *testTool) Spec() tool.Spec {
	return tool.Spec{Name: tt.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (tt *testTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	tt.mu.Lock()
	tt.calls = append(tt.calls, c)
	tt.mu.Unlock()
	if tt.invoke != nil {
		return tt.invoke(ctx, c)
	}
	return tool.Result{Output: "echo " + c.Arguments}, nil
}

func (tt *testTool) Calls() []tool.Call {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return append([]tool.Call(nil), tt.calls...)
}

type env struct {
	*runtest.Fixture
	h *toolinvoke.Handler
}

func newEnv(t *testing.T, cfg toolinvoke.Config, tools ...tool.Tool) env {
	t.Helper()
	f := runtest.NewStreamed(t)
	reg := tool.NewRegistry(append([]tool.Tool{tool.MarkForImprovement{Pool: f.Pool}}, tools...)...)
	return env{Fixture: f, h: toolinvoke.New(f.Runs, reg, f.Stream, cfg, nil)}
}

// stepWithCalls submits a message and commits its first step asking for
// calls (name, arguments); it returns the run and the calls' events.
func (e env) stepWithCalls(calls ...[2]string) (string, []events.ToolCallRequested) {
	e.T.Helper()
	ctx := context.Background()
	alice := e.User("alice")
	in := e.MustSubmit(alice, e.Thread("alice"), "use the tools", "")
	id := *in.RunID
	c, err := e.Runs.Claim(ctx, id, 1, "step-worker", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		e.T.Fatalf("claim: %+v %v", c, err)
	}
	var ncs []run.NewToolCall
	var evs []events.ToolCallRequested
	for i, call := range calls {
		tcID := fmt.Sprintf("call_%d", i)
		ncs = append(ncs, run.NewToolCall{ID: tcID, Name: call[0], Arguments: call[1]})
		evs = append(evs, events.ToolCallRequested{RunID: id, ThreadID: in.ThreadID, StepNo: 1, ToolCallID: tcID})
	}
	res, err := e.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "step-worker", Attempt: c.Attempt},
		StartedAt: time.Now(), ToolCalls: ncs, StreamMessageID: "m"})
	if err != nil || res.Outcome != run.OutcomeTools {
		e.T.Fatalf("commit step: %+v %v", res, err)
	}
	return id, evs
}

type callRow struct {
	Status string
	Output *string
	Error  *string
}

func (e env) call(runID, toolCallID string) callRow {
	e.T.Helper()
	tc, _, err := e.Runs.GetToolCallAndRun(context.Background(), runID, toolCallID)
	if err != nil {
		e.T.Fatal(err)
	}
	return callRow{Status: tc.Status, Output: tc.Output, Error: tc.Error}
}

// nextSteps counts step.ready rows for step 2 of the run (published or not).
func (e env) nextSteps(runID string) int {
	e.T.Helper()
	return e.Count(`SELECT count(*) FROM outbox WHERE type = $1 AND data->>'run_id' = $2 AND (data->>'step_no')::int = 2`,
		events.TypeStepReady, runID)
}

// toolEvents counts the run stream's tool events of kind (started, finished)
// for a call.
// stream reads run runID's stream once the relay delivered what Handle
// handed it (a result's events go with the next step's event).
func (e env) stream(runID string) []runtest.StreamEntry {
	e.T.Helper()
	e.Relay.Wait()
	return e.Stream.Read(runID)
}

func (e env) toolEvents(runID, toolCallID, kind string) int {
	e.T.Helper()
	n := 0
	for _, ev := range e.stream(runID) {
		if ev.Event != runstream.EventCustom {
			continue
		}
		chunk, _ := ev.Payload["chunk"].(map[string]any)
		te, _ := chunk["event"].(map[string]any)
		data, _ := te["data"].(map[string]any)
		if data["tool_call_id"] == toolCallID && data["event"] == kind {
			n++
		}
	}
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestACallRunsOnceItsResultIsRecordedAndTheLastCallReadiesTheNextStep(t *testing.T) {
	t.Parallel()
	echo := &testTool{name: "echo"}
	e := newEnv(t, toolinvoke.Config{}, echo)
	id, calls := e.stepWithCalls([2]string{"echo", `{"n":1}`}, [2]string{"echo", `{"n":2}`})
	ctx := ctxT(t)

	if err := e.h.Handle(ctx, calls[0]); err != nil {
		t.Fatalf("Handle call 0: %v", err)
	}
	got := echo.Calls()
	if len(got) != 1 || got[0].ToolCallID != "call_0" || got[0].Arguments != `{"n":1}` || got[0].RunID != id || got[0].UID != "alice" {
		t.Fatalf("tool invocations = %+v, want call_0 once with its arguments", got)
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolSuccess || str(c.Output) != `echo {"n":1}` {
		t.Errorf("call_0 row = %s %s", c.Status, str(c.Output))
	}
	if c := e.call(id, "call_1"); c.Status != run.ToolPending {
		t.Errorf("call_1 ran before its delivery: %s", c.Status)
	}
	if n := e.Count(`SELECT pending_tools FROM agent_run_steps WHERE run_id = $1 AND step_no = 1`, id); n != 1 {
		t.Errorf("pending_tools = %d, want 1", n)
	}
	if n := e.nextSteps(id); n != 0 {
		t.Fatalf("the next step was readied with a call still running")
	}
	if e.toolEvents(id, "call_0", runstream.ToolStarted) != 1 || e.toolEvents(id, "call_0", runstream.ToolFinished) != 1 {
		t.Errorf("call_0 must stream one started and one finished event: %+v", e.stream(id))
	}

	if err := e.h.Handle(ctx, calls[1]); err != nil {
		t.Fatalf("Handle call 1: %v", err)
	}
	if c := e.call(id, "call_1"); c.Status != run.ToolSuccess {
		t.Errorf("call_1 row = %s", c.Status)
	}
	if n := e.nextSteps(id); n != 1 {
		t.Fatalf("step.ready for step 2 rows = %d, want 1", n)
	}
	evs := e.WaitEvents(events.TypeStepReady, 2) // step 1 (intake) and step 2
	if next := runtest.Decode[events.StepReady](t, evs[1]); next.RunID != id || next.StepNo != 2 {
		t.Errorf("step.ready = %+v", next)
	}
	r, _ := e.Runs.Get(ctx, id)
	if r.Status != run.StatusRunning || run.IsTerminal(r.Status) {
		t.Errorf("run after its tools: %s", r.Status)
	}
}

func TestConcurrentlyFinishingCallsReadyTheNextStepExactlyOnce(t *testing.T) {
	t.Parallel()
	const n = 8
	// Every invocation waits until all n are in flight, so the results are
	// recorded at the same time.
	var arrived sync.WaitGroup
	arrived.Add(n)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	gate := &testTool{name: "gate", invoke: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		arrived.Done()
		select {
		case <-allIn:
			return tool.Result{Output: "done " + c.ToolCallID}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}}
	e := newEnv(t, toolinvoke.Config{}, gate)
	specs := make([][2]string, n)
	for i := range specs {
		specs[i] = [2]string{"gate", "{}"}
	}
	id, calls := e.stepWithCalls(specs...)
	ctx := ctxT(t)

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range calls {
		wg.Add(1)
		go func(c events.ToolCallRequested) {
			defer wg.Done()
			errs <- e.h.Handle(ctx, c)
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
	}

	if got := len(gate.Calls()); got != n {
		t.Errorf("tool invocations = %d, want %d", got, n)
	}
	if k := e.Count(`SELECT count(*) FROM tool_calls WHERE run_id = $1 AND status = 'success'`, id); k != n {
		t.Errorf("recorded results = %d, want %d", k, n)
	}
	if k := e.Count(`SELECT pending_tools FROM agent_run_steps WHERE run_id = $1 AND step_no = 1`, id); k != 0 {
		t.Errorf("pending_tools = %d, want 0", k)
	}
	if k := e.nextSteps(id); k != 1 {
		t.Fatalf("step.ready for step 2 rows = %d, want exactly 1", k)
	}
	e.WaitEvents(events.TypeStepReady, 2)
	if k := len(e.Recorder.Events(events.TypeStepReady)); k != 2 {
		t.Errorf("published step.ready events = %d, want 2 (step 1 and step 2)", k)
	}
}

func TestADuplicateDeliveryDoesNothing(t *testing.T) {
	t.Parallel()
	runs := 0
	counter := &testTool{name: "counter", invoke: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		runs++ // deliveries are sequential in this test
		return tool.Result{Output: fmt.Sprintf("run %d", runs)}, nil
	}}
	e := newEnv(t, toolinvoke.Config{}, counter)
	id, calls := e.stepWithCalls([2]string{"counter", "{}"})
	ctx := ctxT(t)

	if err := e.h.Handle(ctx, calls[0]); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolSuccess || str(c.Output) != "run 1" {
		t.Fatalf("first delivery recorded %s %s", c.Status, str(c.Output))
	}
	before := len(e.stream(id))
	if err := e.h.Handle(ctx, calls[0]); err != nil {
		t.Fatalf("duplicate delivery: %v", err)
	}
	if runs != 1 {
		t.Errorf("the tool ran %d times for one call", runs)
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolSuccess || str(c.Output) != "run 1" {
		t.Errorf("the duplicate changed the result: %s %s", c.Status, str(c.Output))
	}
	if after := len(e.stream(id)); after != before {
		t.Errorf("the duplicate appended %d stream events", after-before)
	}
	if n := e.nextSteps(id); n != 1 {
		t.Errorf("step.ready for step 2 rows = %d, want 1", n)
	}
	if n := e.Count(`SELECT pending_tools FROM agent_run_steps WHERE run_id = $1 AND step_no = 1`, id); n != 0 {
		t.Errorf("pending_tools = %d, want 0 (not decremented twice below zero or left)", n)
	}
}

func TestAnUnknownToolOrBadArgumentsAreRecordedAsToolErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, toolinvoke.Config{})
	id, calls := e.stepWithCalls([2]string{"no_such_tool", "{}"}, [2]string{"mark_for_improvement", `{"wrong":1}`})
	ctx := ctxT(t)

	for _, c := range calls {
		if err := e.h.Handle(ctx, c); err != nil {
			t.Fatalf("Handle %s: %v (a tool error is a result, not a failure)", c.ToolCallID, err)
		}
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolError || !strings.Contains(str(c.Error), `unknown tool "no_such_tool"`) {
		t.Errorf("unknown tool row = %s %q", c.Status, str(c.Error))
	}
	if c := e.call(id, "call_1"); c.Status != run.ToolError || !strings.Contains(str(c.Error), "arguments must be") {
		t.Errorf("bad arguments row = %s %q", c.Status, str(c.Error))
	}
	if n := e.Count(`SELECT count(*) FROM improvement_marks`); n != 0 {
		t.Errorf("bad arguments saved %d leads", n)
	}
	// The model sees the errors: the run goes on to its next step.
	if n := e.nextSteps(id); n != 1 {
		t.Errorf("step.ready for step 2 rows = %d, want 1", n)
	}
	if e.toolEvents(id, "call_0", runstream.ToolFinished) != 1 || e.toolEvents(id, "call_1", runstream.ToolFinished) != 1 {
		t.Errorf("each failed call streams one finished event")
	}
}

func TestATimedOutToolIsRecordedAsAToolError(t *testing.T) {
	t.Parallel()
	hang := &testTool{name: "hang", invoke: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		<-ctx.Done() // a tool that never answers by itself
		return tool.Result{}, ctx.Err()
	}}
	e := newEnv(t, toolinvoke.Config{Timeout: 50 * time.Millisecond}, hang)
	id, calls := e.stepWithCalls([2]string{"hang", "{}"})

	if err := e.h.Handle(ctxT(t), calls[0]); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if c := e.call(id, "call_0"); c.Status != run.ToolError || !strings.Contains(str(c.Error), "timed out after 50ms") {
		t.Errorf("timed-out call row = %s %q", c.Status, str(c.Error))
	}
	if n := e.nextSteps(id); n != 1 {
		t.Errorf("step.ready for step 2 rows = %d, want 1", n)
	}
}
