package e2e

// A steer sent on the parent's thread while a sub-agent works reaches the
// running child at its next model call (as a user message saying it was sent
// to the delegating agent); the parent then handles the steer itself once
// its run reaches its boundary.

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestSteerReachesARunningSubagent(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := subagentSetup(t, p)
	const steerText = "also mention the moon"
	childBusy, release := make(chan struct{}), make(chan struct{})
	var once, busyOnce sync.Once
	var mu sync.Mutex
	var childSaw []string // the child's last message at its second model call
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if isResearcher(req) {
			if last.Role == "user" && !strings.Contains(last.Content, steerText) {
				busyOnce.Do(func() { close(childBusy) })
				<-release // the steer is queued while the child is in its first model call
				return llmtest.Calls(llmtest.ToolCall{ID: "call_look", Name: "web_fetch", Arguments: `{"url":"not a url"}`})
			}
			mu.Lock()
			for _, m := range req.Messages {
				if m.Role == "user" {
					childSaw = append(childSaw, m.Content)
				}
			}
			mu.Unlock()
			return llmtest.Text("the sky is blue, and the moon is grey")
		}
		switch {
		case req.LastUserMessage() == steerText:
			return llmtest.Text("steer handled")
		case last.Role == "user":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_task", Name: "task",
				Arguments: `{"description":"Which colour is the sky?","subagent_slug":"researcher"}`})
		default:
			return llmtest.Text("Delegated: " + testkit.ToolMessages(req)["call_task"])
		}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "steer"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "ask the researcher", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	select {
	case <-childBusy:
	case <-time.After(30 * time.Second):
		t.Fatal("the child never called the model")
	}
	steer := c.Submit(th, steerText, map[string]any{"agent_slug": "lead", "queue_policy": "steer"})
	if steer["status"] != "queued" {
		t.Fatalf("steer: %v", steer)
	}
	once.Do(func() { close(release) })
	if r := testkit.Render(c.Collect(runID, 60*time.Second)); r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run: %+v", r)
	}
	mu.Lock()
	saw := strings.Join(childSaw, "\n")
	mu.Unlock()
	if !strings.Contains(saw, steerNoteStart) || !strings.Contains(saw, steerText) {
		t.Errorf("the child's second model call did not carry the steer: %q", saw)
	}
	// The parent handles the steer itself afterwards.
	steerRun := c.WaitDispatched(steer["request_id"].(string), 30*time.Second)
	if r := testkit.Render(c.Collect(steerRun, 30*time.Second)); r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), "steer handled") {
		t.Errorf("steer run: %+v", r)
	}
}

const steerNoteStart = "While you work, the user sent this to the agent that delegated this task to you"
