package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const callPath = "/api/agent-invocation/agent-call/runs"

func userMsg(text string) []map[string]any {
	return []map[string]any{{"role": "system", "content": "ignored"}, {"role": "user", "content": text}}
}

func TestAgentCallSyncAsyncAndResult(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Sync "}, {Content: "answer"}},
		Usage: &llmtest.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}})
	out := c.OK("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg("hi sync"),
		"request_id": "call-sync-1", "agent_call_meta": map[string]any{"caller": "script"}})
	wantThread := invoke.HashID("invocation_", "admin:default-chatbot:call-sync-1")
	choice := out["choices"].([]any)[0].(map[string]any)
	msg := choice["messages"].([]any)[0].(map[string]any)
	if out["status"] != "completed" || out["output"] != "Sync answer" || out["thread_id"] != wantThread || out["request_id"] != "call-sync-1" ||
		choice["finish_reason"] != "stop" || msg["role"] != "assistant" || msg["content"] != "Sync answer" {
		t.Fatalf("sync agent-call: %v", out)
	}
	if u, _ := out["usage"].(map[string]any); u == nil || u["prompt_tokens"].(float64) != 10 || u["total_tokens"].(float64) != 12 {
		t.Fatalf("usage: %v", out["usage"])
	}
	runID := out["run_id"].(string)
	if got := p.LLM.Requests()[0].LastUserMessage(); got != "hi sync" {
		t.Errorf("the model got %q", got)
	}
	run := c.OK("GET", "/api/agent/runs/"+runID, nil)["run"].(map[string]any)
	if run["source"] != "agent_call" || run["channel"] != "api" {
		t.Errorf("run origin: %v", run)
	}
	// The invocation thread exists for the caller but is hidden from the chat list.
	if r := c.Do("GET", "/api/chat/thread/"+wantThread+"/history", nil); r.Status != 200 {
		t.Errorf("invocation thread: %d %s", r.Status, r.Body)
	}
	var listed []map[string]any
	c.Do("GET", "/api/chat/threads", nil).Decode(t, &listed)
	for _, th := range listed {
		if th["id"] == wantThread {
			t.Error("an agent-call thread is listed among chats")
		}
	}
	// A replay of the same request answers the same run without another model call.
	again := c.OK("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg("hi sync"), "request_id": "call-sync-1"})
	if again["run_id"] != runID || len(p.LLM.Requests()) != 1 {
		t.Errorf("replay: %v (%d model calls)", again, len(p.LLM.Requests()))
	}

	// Sync needs queue_policy reject; stream is refused; context in meta is refused.
	for _, body := range []map[string]any{
		{"agent_slug": "default-chatbot", "messages": userMsg("x"), "queue_policy": "enqueue"},
		{"agent_slug": "default-chatbot", "messages": userMsg("x"), "stream": true},
		{"agent_slug": "default-chatbot", "messages": userMsg("x"), "agent_call_meta": map[string]any{"context": map[string]any{}}},
		{"agent_slug": "default-chatbot", "messages": []map[string]any{{"role": "assistant", "content": "no user"}}},
		{"agent_slug": "default-chatbot", "messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "http://x/y.png"}}}}}},
	} {
		if r := c.Do("POST", callPath, body); r.Status != 422 || r.Code() == "" {
			t.Errorf("%v: got %d %s, want 422", body, r.Status, r.Body)
		}
	}

	// Async answers at once; the result route reads the run in the same shape.
	hold := make(chan struct{})
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "later"}}, Block: hold})
	as := c.OK("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "async_mode": true,
		"messages": []map[string]any{{"role": "user", "content": []any{map[string]any{"type": "text", "text": "async please"}}}}})
	asyncRun := as["run_id"].(string)
	if as["status"] != "pending" || as["output"] != "" || as["choices"].([]any)[0].(map[string]any)["finish_reason"] != nil {
		t.Fatalf("async: %v", as)
	}
	// A sync call on the busy thread is rejected as the intake answers it.
	rej := c.OK("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg("busy?"), "thread_id": as["thread_id"]})
	if rej["status"] != "rejected" || rej["run_id"] != nil {
		t.Fatalf("sync on a busy thread: %v", rej)
	}
	close(hold)
	c.WaitStatus(asyncRun, "completed", 20*time.Second)
	res := c.OK("POST", callPath+"/result", map[string]any{"run_id": asyncRun, "agent_slug": "default-chatbot"})
	if res["status"] != "completed" || res["output"] != "later" || res["run_id"] != asyncRun {
		t.Fatalf("result: %v", res)
	}
	if r := c.Do("POST", callPath+"/result", map[string]any{"run_id": asyncRun, "agent_slug": "other-agent"}); r.Status != 409 {
		t.Errorf("agent_slug mismatch: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", callPath+"/result", map[string]any{"run_id": ""}); r.Status != 422 {
		t.Errorf("empty run_id: %d %s", r.Status, r.Body)
	}
	bob := c.NewUser("bob")
	if r := bob.Do("POST", callPath+"/result", map[string]any{"run_id": asyncRun}); r.Status != 404 || r.Code() != "run_not_found" {
		t.Errorf("another user's run: %d %s", r.Status, r.Body)
	}
	// Another user naming the caller's thread is refused and nothing runs.
	calls := len(p.LLM.Requests())
	if r := bob.Do("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg("x"), "thread_id": wantThread}); r.Status != 404 {
		t.Errorf("bob on admin's thread: %d %s", r.Status, r.Body)
	}
	if len(p.LLM.Requests()) != calls {
		t.Error("a refused call reached the model")
	}
}

func TestAgentCallSyncWaitTimesOutAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, testkit.Env{"YUXI_SYNC_WAIT": "300ms"})
	c := p.Admin
	hold := make(chan struct{})
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "slow"}}, Block: hold})
	r := c.Do("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg("slow one"), "request_id": "slow-1"})
	if r.Status != http.StatusGatewayTimeout || r.Code() != "sync_wait_timeout" {
		t.Fatalf("want 504 sync_wait_timeout, got %d %s", r.Status, r.Body)
	}
	det := r.JSON()["error"].(map[string]any)["details"].(map[string]any)["run"].(map[string]any)
	runID := det["id"].(string)
	close(hold)
	c.WaitStatus(runID, "completed", 20*time.Second)
	res := c.OK("POST", callPath+"/result", map[string]any{"run_id": runID})
	if res["output"] != "slow" || res["status"] != "completed" {
		t.Fatalf("result after the timeout: %v", res)
	}
}

func TestChannelMessagesAndCommands(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	const path = "/api/agent-invocation/channel/messages"
	send := func(text string, extra map[string]any) testkit.Response {
		body := map[string]any{"channel": "slack", "account_id": "team-1", "chat_id": "C42", "agent_slug": "default-chatbot",
			"message": map[string]any{"type": "text", "text": text}}
		for k, v := range extra {
			body[k] = v
		}
		return c.Do("POST", path, body)
	}
	th := invoke.HashID("channel_", "admin:slack:team-1:C42")
	p.LLM.Enqueue(llmtest.Text("pong"))
	r := send("ping", map[string]any{"message_id": "m-1"})
	out := r.JSON()
	if r.Status != 200 || out["kind"] != "run" || out["channel"] != "slack" || out["thread_id"] != th || out["status"] != "dispatched" ||
		out["queue_policy"] != "steer" {
		t.Fatalf("channel message: %d %s", r.Status, r.Body)
	}
	c.WaitStatus(out["run_id"].(string), "completed", 20*time.Second)
	run := c.OK("GET", "/api/agent/runs/"+out["run_id"].(string), nil)["run"].(map[string]any)
	if run["source"] != "channel" || run["channel"] != "slack" {
		t.Errorf("run origin: %v", run)
	}
	// The same channel message id is idempotent.
	if again := send("ping", map[string]any{"message_id": "m-1"}).JSON(); again["run_id"] != out["run_id"] {
		t.Errorf("redelivered message: %v", again)
	}
	st := send("/state", nil).JSON()
	state, _ := st["state"].(map[string]any)
	if st["kind"] != "command" || st["command"] != "state" || st["thread_id"] != th || state == nil ||
		state["latest_run"].(map[string]any)["id"] != out["run_id"] {
		t.Fatalf("/state: %v", st)
	}
	if r := send("/approve", nil); r.Status != 409 || r.Code() != "no_pending_approval" {
		t.Errorf("/approve with nothing pending: %d %s", r.Status, r.Body)
	}
	if r := send("/nope", nil); r.Status != 422 {
		t.Errorf("unknown command: %d %s", r.Status, r.Body)
	}
	if r := send("/state now", nil); r.Status != 422 {
		t.Errorf("command with args: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", path, map[string]any{"agent_slug": "default-chatbot", "message": map[string]any{"text": "no chat"}}); r.Status != 422 {
		t.Errorf("neither thread_id nor chat_id: %d %s", r.Status, r.Body)
	}
	// A question interrupt: channels cannot answer it (as the original).
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "ask1", Name: "ask_user_question", Arguments: `{"questions":[{"question":"Which?"}]}`}))
	q := send("ask me", nil).JSON()
	c.WaitStatus(q["run_id"].(string), "interrupted", 20*time.Second)
	if r := send("an answer", nil); r.Status != 409 || r.Code() != "ask_user_question_unsupported" {
		t.Errorf("message while a question waits: %d %s", r.Status, r.Body)
	}
	if r := send("/approve", map[string]any{"message_id": "m-approve"}); r.Status != 409 || r.Code() != "ask_user_question_unsupported" {
		t.Errorf("/approve on a question: %d %s", r.Status, r.Body)
	}
	// Another user's chat with the same ids is another thread.
	bob := c.NewUser("bob")
	p.LLM.Enqueue(llmtest.Text("hi bob"))
	b := bob.OK("POST", path, map[string]any{"channel": "slack", "account_id": "team-1", "chat_id": "C42", "agent_slug": "default-chatbot",
		"message": map[string]any{"text": "hello"}})
	if b["thread_id"] == th || b["thread_id"] != invoke.HashID("channel_", "bob:slack:team-1:C42") {
		t.Errorf("bob's thread: %v", b)
	}
	if r := bob.Do("POST", path, map[string]any{"thread_id": th, "agent_slug": "default-chatbot", "message": map[string]any{"text": "/state"}}); r.Status != 404 {
		t.Errorf("bob's /state on admin's thread: %d %s", r.Status, r.Body)
	}
}

func TestEvalRunBlocksAndSummarizesTheTrajectory(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	p.LLM.Enqueue(
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "m1", Name: "mark_for_improvement", Arguments: `{"reason":"eval sample"}`},
			{ID: "m2", Name: "mark_for_improvement", Arguments: `{"reason":" "}`}}, Usage: &llmtest.Usage{PromptTokens: 5, CompletionTokens: 5, TotalTokens: 10}},
		llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "graded"}}, Usage: &llmtest.Usage{PromptTokens: 7, CompletionTokens: 1, TotalTokens: 8}},
	)
	out := c.OK("POST", "/api/agent-invocation/eval/runs", map[string]any{"query": "sample 1", "agent_slug": "default-chatbot",
		"evaluation": map[string]any{"dataset_name": "ds", "dataset_item_id": "item-1"}, "meta": map[string]any{"request_id": "eval-1"}})
	if out["status"] != "completed" || out["output"] != "graded" || out["request_id"] != "eval-1" ||
		out["thread_id"] != invoke.HashID("evaluation_", "admin:default-chatbot:eval-1") {
		t.Fatalf("eval: %v", out)
	}
	sum := out["trajectory_summary"].(map[string]any)
	tools := sum["tools"].([]any)
	if sum["tool_call_count"].(float64) != 2 || sum["tool_error_count"].(float64) != 1 || sum["step_count"].(float64) != 2 ||
		len(tools) != 1 || tools[0].(map[string]any)["name"] != "mark_for_improvement" || sum["duration_ms"] == nil ||
		sum["usage"].(map[string]any)["total_tokens"].(float64) != 18 {
		t.Fatalf("trajectory: %v", sum)
	}
	run := c.OK("GET", "/api/agent/runs/"+out["agent_run_id"].(string), nil)["run"].(map[string]any)
	if run["source"] != "agent_evaluation" {
		t.Errorf("run source: %v", run["source"])
	}
	// The sample's evaluation context is kept with its input message, as
	// the original's agent_invocation_meta.evaluation.
	var input map[string]any
	for _, m := range c.OK("GET", "/api/chat/thread/"+out["thread_id"].(string)+"/history", nil)["history"].([]any) {
		if m := m.(map[string]any); m["type"] == "human" {
			input = m
		}
	}
	meta, _ := input["extra_metadata"].(map[string]any)
	inv, _ := meta["agent_invocation_meta"].(map[string]any)
	ev, _ := inv["evaluation"].(map[string]any)
	if meta["source"] != "agent_evaluation" || ev["dataset_name"] != "ds" || ev["dataset_item_id"] != "item-1" {
		t.Errorf("the input message's metadata: %v", input)
	}
	if r := c.Do("POST", "/api/agent-invocation/eval/runs", map[string]any{"query": " ", "agent_slug": "default-chatbot"}); r.Status != 422 {
		t.Errorf("empty query: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", "/api/agent-invocation/eval/runs", map[string]any{"query": "x", "agent_slug": "no-such-agent"}); r.Status != 404 || !strings.HasSuffix(r.Code(), "not_found") {
		t.Errorf("unknown agent: %d %s", r.Status, r.Body)
	}
}
