package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestCancelStopsStreamingPromptly(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	hold := make(chan struct{})
	defer close(hold)
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "partial "}, {Content: "never sent"}}, Block: hold, BlockAfter: 1})
	c := p.Admin
	th := c.Thread()
	runID := c.Submit(th, "write a novel", nil)["run_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var evs []testkit.Event
	sawToken := make(chan struct{})
	var once bool
	done := make(chan error, 1)
	go func() {
		_, err := c.Stream(ctx, "/api/agent/runs/"+runID+"/events", "", func(e testkit.Event) bool {
			evs = append(evs, e)
			if e.Event == "messages" && !once {
				once = true
				close(sawToken)
			}
			return e.Event != "end"
		})
		done <- err
	}()
	select {
	case <-sawToken:
	case <-ctx.Done():
		t.Fatal("no token streamed")
	}
	start := time.Now()
	run := c.OK("POST", "/api/agent/runs/"+runID+"/cancel", nil)["run"].(map[string]any)
	if run["status"] != "cancel_requested" {
		t.Fatalf("cancel of a running run: %v", run)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cancel took %s to end the stream", took)
	}
	r := testkit.Render(evs)
	if r.EndStatus != "cancelled" || r.Interrupt["reason"] != "cancelled" {
		t.Fatalf("stream after cancel: %+v", r)
	}
	if got := strings.Join(r.Texts(), ""); got != "partial " {
		t.Errorf("streamed text: %q", got)
	}
	res := c.OK("GET", "/api/agent/runs/"+runID+"/result", nil)
	if res["status"] != "cancelled" || res["output"] != "partial " {
		t.Errorf("cancelled result keeps the partial answer: %v", res)
	}
	// A cancelled run pauses the queue but a new message after it runs at once.
	p.LLM.Enqueue(llmtest.Text("fresh"))
	in := c.Submit(th, "next", nil)
	if in["status"] != "dispatched" {
		t.Fatalf("message after cancel: %v", in)
	}
	if r := testkit.Render(c.Collect(in["run_id"].(string), 20*time.Second)); strings.Join(r.Texts(), "") != "fresh" {
		t.Fatalf("next run: %+v", r)
	}
}

func TestCancelQueuedRequestIsIdempotent(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	hold := make(chan struct{})
	defer close(hold)
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "x"}}, Block: hold})
	c := p.Admin
	th := c.Thread()
	c.Submit(th, "one", nil)
	queued := c.Submit(th, "two", nil)
	// Cancel the queued request; it never runs.
	req := c.OK("POST", "/api/agent/requests/"+queued["request_id"].(string)+"/cancel", nil)["request"].(map[string]any)
	if req["status"] != "cancelled" {
		t.Fatalf("cancel request: %v", req)
	}
	if again := c.Do("POST", "/api/agent/requests/"+queued["request_id"].(string)+"/cancel", nil); again.Status != 200 {
		t.Errorf("second cancel should be a no-op: %d %s", again.Status, again.Body)
	}
}

func TestSteerEndsTheRunAtTheNextModelBoundary(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	hold := make(chan struct{})
	p.LLM.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "m1", Name: "mark_for_improvement", Arguments: `{"reason":"slow start"}`}}, Block: hold},
		llmtest.Text("steered answer"),
	)
	c := p.Admin
	th := c.Thread()
	first := c.Submit(th, "long task", nil)
	runID := first["run_id"].(string)
	c.WaitStatus(runID, "running", 10*time.Second) // its model call is held
	steer := c.Submit(th, "stop, do this instead", map[string]any{"queue_policy": "steer"})
	if steer["status"] != "queued" || steer["queue_position"].(float64) != 1 {
		t.Fatalf("steer: %v", steer)
	}
	close(hold)
	r := testkit.Render(c.Collect(runID, 20*time.Second))
	if r.EndStatus != "completed" {
		t.Fatalf("steered run should complete: %+v", r)
	}
	steerRun := c.WaitDispatched(steer["request_id"].(string), 10*time.Second)
	r2 := testkit.Render(c.Collect(steerRun, 20*time.Second))
	if strings.Join(r2.Texts(), "") != "steered answer" {
		t.Fatalf("steer run: %+v", r2)
	}
	// The already-started tool batch finished; the steer run saw it and the new message.
	reqs := p.LLM.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls: %d", len(reqs))
	}
	var seq []string
	for _, m := range reqs[1].Messages {
		seq = append(seq, m.Role)
	}
	if got := strings.Join(seq, ","); got != "system,user,assistant,tool,user" {
		t.Fatalf("steer transcript: %s", got)
	}
}

func TestMaxExecutionStepsBoundsARun(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	ag := c.OK("POST", "/api/agent", map[string]any{"name": "Looper", "slug": "looper",
		"config_json": map[string]any{"context": map[string]any{"max_execution_steps": 2, "system_prompt": "loop"}}})
	if ag["slug"] != "looper" {
		t.Fatalf("create agent: %v", ag)
	}
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		return llmtest.Calls(llmtest.ToolCall{Name: "mark_for_improvement", Arguments: `{"reason":"again"}`})
	})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "looper"})["id"].(string)
	in := c.OK("POST", "/api/agent/runs", map[string]any{"query": "go", "agent_slug": "looper", "thread_id": th})
	r := testkit.Render(c.Collect(in["run_id"].(string), 20*time.Second))
	if r.EndStatus != "failed" {
		t.Fatalf("want failed: %+v", r)
	}
	res := c.OK("GET", "/api/agent/runs/"+in["run_id"].(string)+"/result", nil)
	if res["error"].(map[string]any)["type"] != "max_execution_steps_exceeded" {
		t.Fatalf("result: %v", res)
	}
	if n := len(p.LLM.Requests()); n != 2 {
		t.Errorf("model turns: %d, want 2", n)
	}
	if p.LLM.Requests()[0].Messages[0].Content != "loop" {
		t.Errorf("agent system prompt not used")
	}
}

func TestModelErrorsAreRetriedWithARetryMarker(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.LLM.Enqueue(
		llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "lost half"}}, Disconnect: true, DisconnectAfter: 1},
		llmtest.Fail(503, "overloaded"),
		llmtest.Text("recovered"),
	)
	c := p.Admin
	th := c.Thread()
	runID := c.Submit(th, "hi", nil)["run_id"].(string)
	evs := c.Collect(runID, 30*time.Second)
	r := testkit.Render(evs)
	if r.EndStatus != "completed" || strings.Join(r.Texts(), "") != "recovered" || r.Retries != 2 {
		t.Fatalf("render: texts=%q retries=%d end=%s", r.Texts(), r.Retries, r.EndStatus)
	}
	// A client that never saw the retry marker would show the lost half: the
	// marker is what makes the final message render exactly once.
	if !strings.Contains(string(mustJSON(evs)), "lost half") {
		t.Error("test scenario did not stream a partial answer")
	}
}

func TestPermanentModelErrorFailsTheRun(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.LLM.Enqueue(llmtest.Fail(401, "bad key"))
	c := p.Admin
	runID := c.Submit(c.Thread(), "hi", nil)["run_id"].(string)
	evs := c.Collect(runID, 20*time.Second)
	r := testkit.Render(evs)
	if r.EndStatus != "failed" || r.Retries != 0 {
		t.Fatalf("render: %+v", r)
	}
	var sawError bool
	for _, e := range evs {
		if e.Event == "error" {
			sawError = true
		}
	}
	if !sawError {
		t.Error("no error event")
	}
}

func mustJSON(v any) []byte { return []byte(testkit.MustJSON(v)) }
