package e2e

// Tool approval through the local platform (no sandbox needed: an agent's
// tool_policies put mark_for_improvement, a builtin tool with a visible
// side effect, under confirm): the run ends interrupted with the
// original's approval interrupt; approve runs the call exactly once in the
// resume run, reject hands the model a refusal; an expired approval refuses
// the resume (409 approval_expired) and the next message resolves it;
// block refuses; always_trust (thread override) runs at once; a channel's
// /approve resumes with approve.

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestToolApprovalApproveRejectExpireAndBlock(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	c.OK("POST", "/api/agent", map[string]any{"name": "Careful", "slug": "careful", "config_json": map[string]any{"context": map[string]any{
		"tool_policies": map[string]any{"mark_for_improvement": "confirm", "ask_user_question": "block"}}}})
	if r := c.Do("POST", "/api/agent", map[string]any{"name": "Bad", "config_json": map[string]any{"context": map[string]any{
		"tool_policies": map[string]any{"execute": "sometimes"}}}}); r.Status != 422 {
		t.Fatalf("bad policy: %d %s", r.Status, r.Body)
	}
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "careful", "title": "approvals"})["id"].(string)
	marks := func() int {
		var n int
		if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM improvement_marks WHERE thread_id = $1`, th).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	submit := func(query string, extra map[string]any) string {
		body := map[string]any{"query": query, "agent_slug": "careful", "thread_id": th}
		for k, v := range extra {
			body[k] = v
		}
		return c.OK("POST", "/api/agent/runs", body)["run_id"].(string)
	}
	resume := func(parent string, decisions ...string) testkit.Response {
		var ds []map[string]any
		for _, d := range decisions {
			ds = append(ds, map[string]any{"type": d})
		}
		return c.Do("POST", "/api/agent/runs", map[string]any{"agent_slug": "careful", "thread_id": th, "created_by_run_id": parent,
			"resume": map[string]any{"decisions": ds}})
	}

	// 1. Two calls in one step: both wait; approve the first, reject the second.
	p.LLM.Enqueue(llmtest.Calls(
		llmtest.ToolCall{ID: "mark_a", Name: "mark_for_improvement", Arguments: `{"reason":"first"}`},
		llmtest.ToolCall{ID: "mark_b", Name: "mark_for_improvement", Arguments: `{"reason":"second"}`}))
	run1 := submit("mark two things", nil)
	r := testkit.Render(c.Collect(run1, 30*time.Second))
	if r.EndStatus != "interrupted" || r.Interrupt == nil || r.Interrupt["reason"] != "human_approval" {
		t.Fatalf("run 1: %+v", r)
	}
	chunk, _ := r.Interrupt["chunk"].(map[string]any)
	appr, _ := chunk["approval"].(map[string]any)
	reqs, _ := appr["action_requests"].([]any)
	cfgs, _ := appr["review_configs"].([]any)
	if chunk["status"] != "human_approval_required" || chunk["source"] != "tool_approval" || len(reqs) != 2 || len(cfgs) != 2 || appr["expires_at"] == nil {
		t.Fatalf("approval interrupt: %v", r.Interrupt)
	}
	first, _ := reqs[0].(map[string]any)
	if first["name"] != "mark_for_improvement" || first["args"].(map[string]any)["reason"] != "first" || first["tool_call_id"] == "" {
		t.Fatalf("action request: %v", first)
	}
	if got := c.OK("GET", "/api/agent/runs/"+run1, nil)["run"].(map[string]any); got["error_type"] != "human_approval_required" {
		t.Fatalf("interrupted run: %v", got)
	}
	if n := marks(); n != 0 {
		t.Fatalf("%d marks saved before approval", n)
	}
	// A new message is refused while the approval waits; a wrong number of decisions is refused.
	if r := c.Do("POST", "/api/agent/runs", map[string]any{"query": "x", "agent_slug": "careful", "thread_id": th}); r.Status != 409 || r.Code() != "run_interrupted" {
		t.Fatalf("message while waiting: %d %s", r.Status, r.Body)
	}
	if r := resume(run1, "approve", "approve", "reject"); r.Status != 422 || r.Code() != "decision_count_mismatch" {
		t.Fatalf("3 decisions for 2 calls: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", "/api/agent/runs", map[string]any{"agent_slug": "careful", "thread_id": th, "created_by_run_id": run1,
		"resume": map[string]any{"q-1": "yes"}}); r.Status != 422 || r.Code() != "decisions_required" {
		t.Fatalf("answer without decisions: %d %s", r.Status, r.Body)
	}
	p.LLM.Enqueue(llmtest.Text("one saved, one refused"))
	res := resume(run1, "approve", "reject")
	if res.Status != 200 {
		t.Fatalf("resume: %d %s", res.Status, res.Body)
	}
	run2 := res.JSON()["run_id"].(string)
	r = testkit.Render(c.Collect(run2, 30*time.Second))
	if r.EndStatus != "completed" || strings.Join(r.Texts(), "") != "one saved, one refused" {
		t.Fatalf("resume run: %+v", r)
	}
	if again := resume(run1, "approve", "reject"); again.Status != 200 || again.JSON()["run_id"] != run2 {
		t.Fatalf("double submit: %d %s", again.Status, again.Body)
	}
	if n := marks(); n != 1 {
		t.Fatalf("%d marks after approve+reject, want 1", n)
	}
	var reason, markRun string
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT reason, run_id FROM improvement_marks WHERE thread_id = $1`, th).Scan(&reason, &markRun); err != nil || reason != "first" || markRun != run2 {
		t.Fatalf("mark: %q in %s (%v), want first in %s", reason, markRun, err, run2)
	}
	msgs := testkit.ToolMessages(modelRequestsFor(t, p, "mark two things")[1])
	if len(msgs) != 2 || strings.Contains(msgs["mark_a"], "rejected") || !strings.Contains(msgs["mark_b"], "The user rejected the tool call mark_for_improvement") {
		t.Fatalf("tool results the model read: %q", msgs)
	}

	// 2. Expiry: the resume is refused with 409 approval_expired, the next message resolves the call.
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "mark_c", Name: "mark_for_improvement", Arguments: `{"reason":"late"}`}))
	run3 := submit("mark once more", nil)
	c.WaitStatus(run3, "interrupted", 30*time.Second)
	if _, err := p.P.App.Pool.Exec(t.Context(), `UPDATE tool_calls SET tool_output = jsonb_set(tool_output::jsonb, '{expires_at}', '"2001-01-01T00:00:00Z"')::text
		WHERE run_id = $1 AND status = 'interrupted'`, run3); err != nil {
		t.Fatal(err)
	}
	if r := resume(run3, "approve"); r.Status != 409 || r.Code() != "approval_expired" {
		t.Fatalf("resume after expiry: %d %s", r.Status, r.Body)
	}
	p.LLM.Enqueue(llmtest.Text("noted"))
	run4 := submit("never mind", nil)
	c.WaitStatus(run4, "completed", 30*time.Second)
	msgs = testkit.ToolMessages(modelRequestsFor(t, p, "never mind")[0])
	if !strings.Contains(msgs["mark_c"], "expired at 2001-01-01T00:00:00Z") || marks() != 1 {
		t.Fatalf("expired call: %q, %d marks", msgs, marks())
	}

	// 3. Block: the call is refused at once and the run goes on.
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "ask_x", Name: "ask_user_question", Arguments: `{"questions":[{"question":"?"}]}`}),
		llmtest.Text("blocked, fine"))
	run5 := submit("ask me", nil)
	c.WaitStatus(run5, "completed", 30*time.Second)
	if msgs := testkit.ToolMessages(modelRequestsFor(t, p, "ask me")[1]); !strings.Contains(msgs["ask_x"], "blocked by this agent's tool policy") {
		t.Fatalf("blocked call: %q", msgs)
	}

	// 4. always_trust as the thread's override: no interrupt.
	if r := c.Do("PUT", "/api/chat/thread/"+th, map[string]any{"tool_approval_mode": "sometimes"}); r.Status != 422 {
		t.Fatalf("bad thread mode: %d %s", r.Status, r.Body)
	}
	upd := c.OK("PUT", "/api/chat/thread/"+th, map[string]any{"tool_approval_mode": "always_trust"})
	if md, _ := upd["metadata"].(map[string]any); md["tool_approval_mode"] != "always_trust" {
		t.Fatalf("thread metadata: %v", upd)
	}
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "mark_d", Name: "mark_for_improvement", Arguments: `{"reason":"trusted"}`}), llmtest.Text("saved"))
	run6 := submit("trust me", nil)
	c.WaitStatus(run6, "completed", 30*time.Second)
	if n := marks(); n != 2 {
		t.Fatalf("%d marks after a trusted run, want 2", n)
	}
	// A request's own mode wins over the thread's.
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "mark_e", Name: "mark_for_improvement", Arguments: `{"reason":"ask first"}`}))
	run7 := submit("careful now", map[string]any{"tool_approval_mode": "default"})
	c.WaitStatus(run7, "interrupted", 30*time.Second)
}

// TestChannelApproveResumesTheWaitingCall is issue 10's /approve success
// path: a channel message whose run waits for a tool approval is resumed
// with approve by the /approve command, and the call runs.
func TestChannelApproveResumesTheWaitingCall(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	c.OK("POST", "/api/agent", map[string]any{"name": "Careful", "slug": "careful", "config_json": map[string]any{"context": map[string]any{
		"tool_policies": map[string]any{"mark_for_improvement": "confirm"}}}})
	const path = "/api/agent-invocation/channel/messages"
	send := func(text, id string) testkit.Response {
		return c.Do("POST", path, map[string]any{"channel": "slack", "account_id": "team-1", "chat_id": "C7", "agent_slug": "careful",
			"message_id": id, "message": map[string]any{"type": "text", "text": text}})
	}
	th := invoke.HashID("channel_", "admin:slack:team-1:C7")
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "mark_ch", Name: "mark_for_improvement", Arguments: `{"reason":"from slack"}`}))
	first := send("please mark it", "m-1")
	if first.Status != 200 {
		t.Fatalf("channel message: %d %s", first.Status, first.Body)
	}
	runID := first.JSON()["run_id"].(string)
	c.WaitStatus(runID, "interrupted", 30*time.Second)
	p.LLM.Enqueue(llmtest.Text("marked"))
	ap := send("/approve", "m-2")
	out := ap.JSON()
	res, _ := out["run"].(map[string]any)
	if ap.Status != 200 || out["kind"] != "command" || out["command"] != "approve" || res == nil || res["thread_id"] != th {
		t.Fatalf("/approve: %d %s", ap.Status, ap.Body)
	}
	resumed := res["run_id"].(string)
	c.WaitStatus(resumed, "completed", 30*time.Second)
	if again := send("/approve", "m-2").JSON(); again["run"].(map[string]any)["run_id"] != resumed {
		t.Fatalf("replayed /approve: %v", again)
	}
	var n int
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM improvement_marks WHERE thread_id = $1 AND reason = 'from slack' AND run_id = $2`,
		th, resumed).Scan(&n); err != nil || n != 1 {
		t.Fatalf("mark after /approve: %d %v", n, err)
	}
	if r := send("/approve", "m-3"); r.Status != 409 || r.Code() != "no_pending_approval" {
		t.Fatalf("/approve with nothing pending: %d %s", r.Status, r.Body)
	}
}

// TestOpenAITextAfterAnExpiredApproval: over /v1 a tool approval is
// answered by /approve or /reject; other text is 409 approval_pending while
// the approval waits. Once it expired, /approve is 409 approval_expired and
// any other text is a new message: the expired call is resolved as
// rejected (the model reads why) and the thread goes on.
func TestOpenAITextAfterAnExpiredApproval(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	p.Admin.OK("POST", "/api/agent", map[string]any{"name": "Careful", "slug": "careful", "config_json": map[string]any{"context": map[string]any{
		"tool_policies": map[string]any{"mark_for_improvement": "confirm"}}}})
	key := p.Admin.As(p.Admin.APIKey("openai-approval"))
	ask := func(text string) (testkit.Response, string) {
		r := key.Do("POST", "/v1/chat/completions", completion("careful", "expiry", false, u(text)))
		var cc struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		if r.Status == 200 {
			r.Decode(t, &cc)
			if len(cc.Choices) == 1 {
				s, _ := cc.Choices[0].Message["content"].(string)
				return r, s
			}
		}
		return r, ""
	}
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "mark_v1", Name: "mark_for_improvement", Arguments: `{"reason":"via v1"}`}))
	r, content := ask("mark it")
	if r.Status != 200 || !strings.Contains(content, "/approve") {
		t.Fatalf("approval prompt: %d %s", r.Status, r.Body)
	}
	th := r.Header.Get("X-Yuxi-Thread-Id")
	if r, _ := ask("hello?"); r.Status != 409 || openAIErr(t, r)["code"] != "approval_pending" {
		t.Fatalf("text while the approval waits: %d %s", r.Status, r.Body)
	}
	if _, err := p.P.App.Pool.Exec(t.Context(), `UPDATE tool_calls SET tool_output = jsonb_set(tool_output::jsonb, '{expires_at}', '"2001-01-01T00:00:00Z"')::text
		WHERE status = 'interrupted' AND run_id IN (SELECT id FROM agent_runs WHERE conversation_thread_id = $1)`, th); err != nil {
		t.Fatal(err)
	}
	if r, _ := ask("/approve"); r.Status != 409 || openAIErr(t, r)["code"] != "approval_expired" {
		t.Fatalf("/approve after expiry: %d %s", r.Status, r.Body)
	}
	p.LLM.Enqueue(llmtest.Text("fine, not marked"))
	if r, content := ask("forget it"); r.Status != 200 || content != "fine, not marked" {
		t.Fatalf("text after expiry: %d %s", r.Status, r.Body)
	}
	msgs := testkit.ToolMessages(modelRequestsFor(t, p, "forget it")[0])
	var n int
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM improvement_marks WHERE thread_id = $1`, th).Scan(&n); err != nil || n != 0 || len(msgs) != 1 ||
		!strings.Contains(msgs["mark_v1"], "expired at 2001-01-01T00:00:00Z") {
		t.Fatalf("expired call: %q, %d marks (%v)", msgs, n, err)
	}
}
