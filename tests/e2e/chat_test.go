// Package e2e drives the whole platform (all functions in one process, real
// PostgreSQL and Redis, a scripted OpenAI-compatible provider) through its
// public HTTP API, as a user does.
package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestChatStreamsAndCompletes(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Hello"}, {Content: ", "}, {Content: "world"}},
		Usage: &llmtest.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}})
	c := p.Admin
	th := c.Thread()
	in := c.Submit(th, "say hello", map[string]any{"meta": map[string]any{"request_id": "req-hello-1"}})
	if in["status"] != "dispatched" || in["request_id"] != "req-hello-1" || in["thread_id"] != th {
		t.Fatalf("intake: %v", in)
	}
	runID := in["run_id"].(string)
	if in["stream_url"] != "/api/agent/runs/"+runID+"/events" {
		t.Errorf("stream_url: %v", in["stream_url"])
	}
	evs := c.Collect(runID, 20*time.Second)
	r := testkit.Render(evs)
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("end: %+v", r)
	}
	if got := r.Texts(); len(got) != 1 || got[0] != "Hello, world" {
		t.Fatalf("rendered %q", got)
	}
	if evs[0].Event != "metadata" || evs[0].Payload()["request_id"] != "req-hello-1" {
		t.Errorf("first event should be metadata: %s %s", evs[0].Event, evs[0].Data)
	}
	var env map[string]any
	_ = json.Unmarshal(evs[0].Data, &env)
	if env["schema_version"].(float64) != 1 || env["run_id"] != runID || env["thread_id"] != th || env["event"] != "metadata" || env["created_at"] == nil {
		t.Errorf("envelope: %s", evs[0].Data)
	}
	res := c.OK("GET", "/api/agent/runs/"+runID+"/result", nil)
	if res["status"] != "completed" || res["output"] != "Hello, world" || res["request_id"] != "req-hello-1" || res["final_message_id"] == nil {
		t.Fatalf("result: %v", res)
	}
	usage := res["token_usage"].(map[string]any)["total"].(map[string]any)
	if usage["total_tokens"].(float64) != 15 {
		t.Errorf("usage: %v", res["token_usage"])
	}
	hist := c.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any)
	if len(hist) != 2 || hist[0].(map[string]any)["type"] != "human" || hist[1].(map[string]any)["content"] != "Hello, world" {
		t.Fatalf("history: %v", hist)
	}
	// The model saw the system prompt and the user's message.
	reqs := p.LLM.Requests()
	if len(reqs) != 1 || reqs[0].Model != "test-model" || reqs[0].Messages[0].Role != "system" || reqs[0].LastUserMessage() != "say hello" {
		t.Fatalf("provider requests: %+v", reqs)
	}
	// Replaying the same request id answers the same run and sends nothing new.
	again := c.Submit(th, "say hello", map[string]any{"meta": map[string]any{"request_id": "req-hello-1"}})
	if again["run_id"] != runID {
		t.Errorf("replay: %v", again)
	}
	if len(p.LLM.Requests()) != 1 {
		t.Error("replay called the model again")
	}
}

func TestToolCallsFanOutAndTheRunContinues(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.LLM.Enqueue(
		llmtest.Calls(
			llmtest.ToolCall{ID: "call_a", Name: "mark_for_improvement", Arguments: `{"reason":"the search tool returned nothing twice"}`},
			llmtest.ToolCall{ID: "call_b", Name: "mark_for_improvement", Arguments: `{"reason":"  "}`},
		),
		llmtest.Text("Noted."),
	)
	c := p.Admin
	th := c.Thread()
	runID := c.Submit(th, "remember this", nil)["run_id"].(string)
	r := testkit.Render(c.Collect(runID, 20*time.Second))
	if r.EndStatus != "completed" || strings.Join(r.Texts(), "|") != "|Noted." && strings.Join(r.Texts(), "|") != "Noted." {
		t.Fatalf("render: %+v", r)
	}
	reqs := p.LLM.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls: %d", len(reqs))
	}
	var results []string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			results = append(results, m.ToolCallID+"="+m.Content)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], `"saved":true`) || !strings.Contains(results[1], "reason must be 1 to 4000") {
		t.Fatalf("tool results sent to the model: %v", results)
	}
	var marks int
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM improvement_marks WHERE run_id = $1`, runID).Scan(&marks); err != nil || marks != 1 {
		t.Fatalf("improvement marks: %d %v", marks, err)
	}
	hist := c.OK("GET", "/api/chat/thread/"+th+"/history", nil)["history"].([]any)
	calls := hist[1].(map[string]any)["tool_calls"].([]any)
	if len(calls) != 2 || calls[0].(map[string]any)["status"] != "success" || calls[1].(map[string]any)["status"] != "error" {
		t.Fatalf("history tool calls: %v", calls)
	}
}

func TestAskUserQuestionInterruptsAndResumeContinues(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "ask1", Name: "ask_user_question",
		Arguments: `{"questions":[{"question":"Which city?","options":[{"label":"Kyoto","value":"kyoto"},{"label":"Osaka","value":"osaka"}]}]}`}))
	c := p.Admin
	th := c.Thread()
	runID := c.Submit(th, "plan my trip", nil)["run_id"].(string)
	r := testkit.Render(c.Collect(runID, 20*time.Second))
	if r.EndStatus != "interrupted" || r.Interrupt == nil || r.Interrupt["reason"] != "ask_user_question_required" {
		t.Fatalf("want interrupted with questions: %+v", r)
	}
	qs := r.Interrupt["chunk"].(map[string]any)["questions"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["question_id"] != "q-1" {
		t.Fatalf("questions: %v", qs)
	}
	// New messages are refused while the question waits.
	resp := c.Do("POST", "/api/agent/runs", map[string]any{"query": "hello?", "agent_slug": "default-chatbot", "thread_id": th})
	if resp.Status != http.StatusConflict || resp.Code() != "run_interrupted" {
		t.Fatalf("want 409 run_interrupted, got %d %s", resp.Status, resp.Body)
	}
	active := c.OK("GET", "/api/agent/thread/"+th+"/active_run", nil)["run"].(map[string]any)
	if active["id"] != runID || active["status"] != "interrupted" {
		t.Errorf("active run: %v", active)
	}
	p.LLM.Enqueue(llmtest.Text("Kyoto it is."))
	resume := map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "resume": map[string]any{"q-1": "kyoto"}, "created_by_run_id": runID}
	res := c.OK("POST", "/api/agent/runs", resume)
	resumeID := res["run_id"].(string)
	if again := c.OK("POST", "/api/agent/runs", resume); again["run_id"] != resumeID {
		t.Errorf("double resume created another run: %v", again)
	}
	r2 := testkit.Render(c.Collect(resumeID, 20*time.Second))
	if r2.EndStatus != "completed" || strings.Join(r2.Texts(), "") != "Kyoto it is." {
		t.Fatalf("resume run: %+v", r2)
	}
	last := p.LLM.Requests()[1]
	tool := last.Messages[len(last.Messages)-1]
	if tool.Role != "tool" || tool.ToolCallID != "ask1" || !strings.Contains(tool.Content, `"answer":{"q-1":"kyoto"}`) {
		t.Fatalf("the answer must reach the model as the tool result: %+v", tool)
	}
	run := c.OK("GET", "/api/agent/runs/"+resumeID, nil)["run"].(map[string]any)
	if run["run_type"] != "resume" || run["created_by_run_id"] != runID {
		t.Errorf("resume run: %v", run)
	}
}

func TestQueuedRequestRunsAfterTheActiveOne(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	hold := make(chan struct{})
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "first"}}, Block: hold}, llmtest.Text("second"))
	c := p.Admin
	th := c.Thread()
	first := c.Submit(th, "one", nil)
	second := c.Submit(th, "two", nil)
	if second["status"] != "queued" || second["queue_position"].(float64) != 1 || second["run_id"] != nil {
		t.Fatalf("second: %v", second)
	}
	snap := c.OK("GET", "/api/agent/thread/"+th+"/requests", nil)
	if snap["queue"].(map[string]any)["status"] != "running" || len(snap["requests"].([]any)) != 1 {
		t.Fatalf("snapshot: %v", snap)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var reqEvents []testkit.Event
	done := make(chan error, 1)
	firstEvent := make(chan struct{})
	go func() {
		_, err := c.Stream(ctx, second["request_events_url"].(string), "", func(e testkit.Event) bool {
			reqEvents = append(reqEvents, e)
			if len(reqEvents) == 1 {
				close(firstEvent)
			}
			return e.Event != "run_created"
		})
		done <- err
	}()
	// The request stream reports the queued position before the first run may end.
	select {
	case <-firstEvent:
	case err := <-done:
		t.Fatalf("the request stream ended before its first event: %v", err)
	case <-ctx.Done():
		t.Fatal("no event on the request stream")
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(reqEvents) < 2 || reqEvents[0].Event != "queued" || reqEvents[len(reqEvents)-1].Event != "run_created" {
		t.Fatalf("request events: %+v", reqEvents)
	}
	var created map[string]any
	_ = json.Unmarshal(reqEvents[len(reqEvents)-1].Data, &created)
	secondRun := created["run_id"].(string)
	if r := testkit.Render(c.Collect(secondRun, 20*time.Second)); strings.Join(r.Texts(), "") != "second" {
		t.Fatalf("second run: %+v", r)
	}
	if r := testkit.Render(c.Collect(first["run_id"].(string), 5*time.Second)); strings.Join(r.Texts(), "") != "first" {
		t.Fatalf("first run: %+v", r)
	}
	// The second turn saw the first exchange.
	msgs := p.LLM.Requests()[1].Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if got := strings.Join(roles, "|"); !strings.Contains(got, "user:one|assistant:first|user:two") {
		t.Fatalf("transcript order: %s", got)
	}
}
