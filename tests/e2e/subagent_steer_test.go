package e2e

// Steers sent on the parent's thread while a sub-agent works reach the
// running child at its next model call, in the order sent (as user messages
// saying they were sent to the delegating agent), and are stored in the
// child's transcript so that later calls show each once, in its place; the
// parent then handles all of them itself, in one run, once its run reaches
// its boundary.

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
	steers := []string{"also mention the moon", "and then the stars"}
	childBusy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var childCalls [][]llmtest.Message // the child's messages at each model call
	var parentSteerRun []string        // the user messages of the parent's run after the steers
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if isResearcher(req) {
			mu.Lock()
			n := len(childCalls)
			childCalls = append(childCalls, req.Messages)
			mu.Unlock()
			switch n {
			case 0:
				close(childBusy)
				<-release // both steers are queued while the child is in its first model call
				return llmtest.Calls(llmtest.ToolCall{ID: "call_look", Name: "web_fetch", Arguments: `{"url":"not a url"}`})
			case 1:
				return llmtest.Calls(llmtest.ToolCall{ID: "call_look2", Name: "web_fetch", Arguments: `{"url":"still not a url"}`})
			}
			return llmtest.Text("the sky is blue, the moon is grey, the stars are white")
		}
		switch {
		case req.LastUserMessage() == steers[1]:
			mu.Lock()
			for _, m := range req.Messages {
				if m.Role == "user" {
					parentSteerRun = append(parentSteerRun, m.Content)
				}
			}
			mu.Unlock()
			return llmtest.Text("steers handled")
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
	var requestIDs []string
	for i, text := range steers {
		steer := c.Submit(th, text, map[string]any{"agent_slug": "lead", "queue_policy": "steer"})
		if steer["status"] != "queued" || steer["queue_position"] != float64(i+1) {
			t.Fatalf("steer %d: %v", i, steer)
		}
		requestIDs = append(requestIDs, steer["request_id"].(string))
	}
	once.Do(func() { close(release) })
	if r := testkit.Render(c.Collect(runID, 60*time.Second)); r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run: %+v", r)
	}
	mu.Lock()
	calls := childCalls
	mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("child model calls: %d, want 3", len(calls))
	}
	// Second call: both steers, in the order sent, after the tool result.
	second := calls[1]
	if n := len(second); n < 3 || second[n-3].Role != "tool" || second[n-2].Content != steerNoteStart+steerNoteRest+steers[0] ||
		second[n-1].Content != steerNoteStart+steerNoteRest+steers[1] {
		t.Fatalf("the child's second model call does not end with the two steers in order: %+v", second)
	}
	// Third call: the steers were stored in the child's transcript, so they
	// keep their place (before the second tool call) and are shown once.
	third := calls[2]
	var shown []int
	for i, m := range third {
		if strings.HasPrefix(m.Content, steerNoteStart) {
			shown = append(shown, i)
		}
	}
	if len(shown) != 2 || third[shown[0]].Content != second[len(second)-2].Content || third[shown[1]].Content != second[len(second)-1].Content ||
		shown[1]+1 >= len(third) || third[shown[1]+1].Role != "assistant" || third[len(third)-1].Role != "tool" {
		t.Errorf("the child's third model call should show each steer once, in its place: %+v", third)
	}
	// The parent handles both steers itself afterwards, in one run, in order.
	steerRun := c.WaitDispatched(requestIDs[0], 30*time.Second)
	if other := c.WaitDispatched(requestIDs[1], 30*time.Second); other != steerRun {
		t.Errorf("the two steers went to two runs: %s and %s", steerRun, other)
	}
	if r := testkit.Render(c.Collect(steerRun, 30*time.Second)); r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), "steers handled") {
		t.Errorf("steer run: %+v", r)
	}
	mu.Lock()
	got := parentSteerRun
	mu.Unlock()
	if n := len(got); n < 3 || got[n-2] != steers[0] || got[n-1] != steers[1] {
		t.Errorf("the parent's steer run should end with both steers in order: %q", got)
	}
}

const (
	steerNoteStart = "While you work, the user sent this to the agent that delegated this task to you"
	steerNoteRest  = " (it will act on it once you finish; take it into account if it concerns your task):\n\n"
)
