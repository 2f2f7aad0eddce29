package e2e

// subagent_await with timeout_seconds: while the child is still running the
// parent's await is answered, within a sweep interval of its deadline, with
// the child's snapshot and wait_timed_out; the child goes on, and a second
// await (no timeout) returns its answer once it ends — exactly once.

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestSubagentAwaitTimesOutWhileTheChildRuns(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, testkit.Env{"YUXI_SWEEP_INTERVAL": "200ms"})
	c := subagentSetup(t, p)
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var timedOut string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if isResearcher(req) {
			<-release // the child stays in its model call until released
			return llmtest.Text("slow finding: green")
		}
		msgs := testkit.ToolMessages(req)
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_start", Name: "subagent_start",
				Arguments: `{"description":"Which colour is grass?","subagent_slug":"researcher"}`})
		case last.ToolCallID == "call_start":
			var started map[string]any
			_ = json.Unmarshal([]byte(last.Content), &started)
			id, _ := started["run_id"].(string)
			return llmtest.Calls(llmtest.ToolCall{ID: "call_await1", Name: "subagent_await", Arguments: `{"run_id":"` + id + `","timeout_seconds":1}`})
		case last.ToolCallID == "call_await1":
			mu.Lock()
			timedOut = last.Content
			mu.Unlock()
			var snap map[string]any
			_ = json.Unmarshal([]byte(last.Content), &snap)
			id, _ := snap["run_id"].(string)
			once.Do(func() { close(release) })
			return llmtest.Calls(llmtest.ToolCall{ID: "call_await2", Name: "subagent_await", Arguments: `{"run_id":"` + id + `"}`})
		default:
			return llmtest.Text("Finally: " + msgs["call_await2"])
		}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "await timeout"})["id"].(string)
	started := time.Now()
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "wait a little", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	events := c.Collect(runID, 60*time.Second)
	if r := testkit.Render(events); r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	var snap map[string]any
	if err := json.Unmarshal([]byte(timedOut), &snap); err != nil || snap["wait_timed_out"] != true || snap["status"] != "running" {
		t.Fatalf("first await's result: %q", timedOut)
	}
	if elapsed := time.Since(started); elapsed < time.Second {
		t.Errorf("the await gave up before its timeout (%s)", elapsed)
	}
	answer := textsByThread(events)[th]
	if !strings.Contains(answer, "slow finding: green") || !strings.Contains(answer, `"status":"completed"`) {
		t.Errorf("second await's result: %q", answer)
	}
	// The first call was answered once (by the timeout), not again by the child's end.
	var n int
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT count(*) FROM tool_calls WHERE run_id = $1 AND tool_call_id = 'call_await1' AND tool_output LIKE '%wait_timed_out%'`, runID).Scan(&n); err != nil || n != 1 {
		t.Errorf("the timed-out call's stored result: %d %v", n, err)
	}
}
