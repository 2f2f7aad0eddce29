package e2e

// Sub-agents end to end with the scripted model: a main agent whose
// context.subagents lists a sub-agent delegates synchronously (task) and
// asynchronously (subagent_start → subagent_await); each child is a durable
// run of its own (run_type subagent, created_by_run_id, its own thread)
// visible through the run APIs, its tokens reach the parent's stream scoped
// by the child's thread, and cancelling the parent cancels the child.

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const researcherPrompt = "You are the researcher sub-agent."

// subagentSetup creates the sub-agent and a main agent allowed to call it.
func subagentSetup(t *testing.T, p *testkit.Local) *testkit.Client {
	t.Helper()
	p.Admin.OK("POST", "/api/agent", map[string]any{"name": "Researcher", "slug": "researcher", "is_subagent": true,
		"config_json": map[string]any{"context": map[string]any{"system_prompt": researcherPrompt}}})
	p.Admin.OK("POST", "/api/agent", map[string]any{"name": "Lead", "slug": "lead",
		"config_json": map[string]any{"context": map[string]any{"subagents": []string{"researcher"}}}})
	return p.Admin
}

func isResearcher(req llmtest.ChatRequest) bool {
	return len(req.Messages) > 0 && req.Messages[0].Role == "system" && req.Messages[0].Content == researcherPrompt
}

// textsByThread renders a stream's message deltas per chunk thread_id.
func textsByThread(events []testkit.Event) map[string]string {
	out := map[string]string{}
	for _, e := range events {
		if e.Event != "messages" {
			continue
		}
		items, _ := e.Payload()["items"].([]any)
		for _, it := range items {
			chunk, _ := it.(map[string]any)
			se, _ := chunk["stream_event"].(map[string]any)
			if se == nil || se["type"] != "message_delta" {
				continue
			}
			th, _ := chunk["thread_id"].(string)
			c, _ := se["content"].(string)
			out[th] += c
		}
	}
	return out
}

func TestSubagentTaskDelegatesAndWaitsWithoutHoldingAFunction(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := subagentSetup(t, p)
	var offered []string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if isResearcher(req) {
			for _, tl := range req.Tools {
				if tl.Name == "task" || tl.Name == "ask_user_question" {
					return llmtest.Text("a sub-agent was offered " + tl.Name)
				}
			}
			return llmtest.Text("Researcher ", "found: ", "42")
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return llmtest.Text("Lead says: " + last.Content)
		}
		offered = offeredToolNames(req.Tools)
		return llmtest.Calls(llmtest.ToolCall{ID: "call_task", Name: "task",
			Arguments: `{"description":"Find the answer to everything.","subagent_slug":"researcher"}`})
	})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "delegation"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "delegate please", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	events := c.Collect(runID, 60*time.Second)
	r := testkit.Render(events)
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run: %+v", r)
	}
	for _, name := range []string{"task", "subagent_start", "subagent_status", "subagent_await", "subagent_cancel"} {
		if !contains(offered, name) {
			t.Errorf("main agent not offered %s: %v", name, offered)
		}
	}

	// The child: a durable run of its own, visible through the run APIs.
	var childID, childThread string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT id, conversation_thread_id FROM agent_runs
		WHERE created_by_run_id = $1 AND run_type = 'subagent'`, runID).Scan(&childID, &childThread); err != nil {
		t.Fatalf("child run: %v", err)
	}
	if !regexp.MustCompile(`^` + th + `_sub_researcher_[0-9a-f]{8}$`).MatchString(childThread) {
		t.Errorf("child thread id %q", childThread)
	}
	child := c.OK("GET", "/api/agent/runs/"+childID, nil)["run"].(map[string]any)
	if child["status"] != "completed" || child["run_type"] != "subagent" || child["created_by_run_id"] != runID || child["agent_slug"] != "researcher" {
		t.Errorf("child run view: %v", child)
	}
	if res := c.OK("GET", "/api/agent/runs/"+childID+"/result", nil); res["output"] != "Researcher found: 42" {
		t.Errorf("child result: %v", res)
	}
	var steps int
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_run_steps WHERE run_id = $1`, childID).Scan(&steps); err != nil || steps != 1 {
		t.Errorf("child checkpoints: %d %v", steps, err)
	}

	// The parent's tool call completed with the child's answer; the parent answered with it.
	texts := textsByThread(events)
	if !strings.Contains(texts[th], "Lead says:") || !strings.Contains(texts[th], "Researcher found: 42") || !strings.Contains(texts[th], childThread) {
		t.Errorf("parent's answer: %q", texts[th])
	}
	// The child's tokens reached the parent's stream, scoped by its thread.
	if texts[childThread] != "Researcher found: 42" {
		t.Errorf("child tokens in the parent's stream: %q (all %v)", texts[childThread], texts)
	}
	// Sub-agent threads stay out of the user's thread list.
	list, _ := json.Marshal(c.OK("GET", "/api/chat/threads", nil))
	if strings.Contains(string(list), childThread) {
		t.Errorf("child thread listed: %s", list)
	}
}

func TestSubagentStartThenAwait(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := subagentSetup(t, p)
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if isResearcher(req) {
			return llmtest.Text("background finding: blue")
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "user":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_start", Name: "subagent_start",
				Arguments: `{"description":"Which colour is the sky?","subagent_slug":"researcher"}`})
		case last.ToolCallID == "call_start":
			var started map[string]any
			_ = json.Unmarshal([]byte(last.Content), &started)
			id, _ := started["run_id"].(string)
			return llmtest.Calls(llmtest.ToolCall{ID: "call_await", Name: "subagent_await", Arguments: `{"run_id":"` + id + `"}`},
				llmtest.ToolCall{ID: "call_other", Name: "subagent_status", Arguments: `{"run_id":"run_not_mine"}`})
		default:
			return llmtest.Text("Awaited: " + testkit.ToolMessages(req)["call_await"] + " | other: " + testkit.ToolMessages(req)["call_other"])
		}
	})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "async"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "start it in the background", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	events := c.Collect(runID, 60*time.Second)
	if r := testkit.Render(events); r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run: %+v", r)
	}
	answer := textsByThread(events)[th]
	if !strings.Contains(answer, "background finding: blue") || !strings.Contains(answer, `"status":"completed"`) {
		t.Errorf("await result: %q", answer)
	}
	if !strings.Contains(answer, "other: Error: no sub-agent run") {
		t.Errorf("another run id was not refused: %q", answer)
	}
}

func TestCancellingTheParentCancelsTheSubagent(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := subagentSetup(t, p)
	childStarted := make(chan struct{}, 1)
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if isResearcher(req) {
			select {
			case childStarted <- struct{}{}:
			default:
			}
			var chunks []llmtest.Chunk
			for i := 0; i < 200; i++ {
				chunks = append(chunks, llmtest.Chunk{Content: "slow ", Delay: 100 * time.Millisecond})
			}
			return llmtest.Reply{Chunks: chunks}
		}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return llmtest.Text("should not be reached after cancel")
		}
		return llmtest.Calls(llmtest.ToolCall{ID: "call_task", Name: "task",
			Arguments: `{"description":"Take a long time.","subagent_slug":"researcher"}`})
	})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "cancel"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "delegate a long task", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	select {
	case <-childStarted:
	case <-time.After(60 * time.Second):
		t.Fatal("the sub-agent never called the model")
	}
	c.OK("POST", "/api/agent/runs/"+runID+"/cancel", nil)
	if r := testkit.Render(c.Collect(runID, 30*time.Second)); r.EndStatus != "cancelled" {
		t.Fatalf("parent: %+v", r)
	}
	var childID, status string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT id, status FROM agent_runs WHERE created_by_run_id = $1`, runID).Scan(&childID, &status); err != nil {
		t.Fatal(err)
	}
	if r := testkit.Render(c.Collect(childID, 30*time.Second)); r.EndStatus != "cancelled" {
		t.Fatalf("child: %+v", r)
	}
}
