package e2e

// Context compression end to end: a thread outgrows summary_threshold; the
// model then sees a stored summary (L2, announced by context_compression
// events) instead of the older messages, keeps answering, and the stored
// messages stay whole.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestLongContextIsCompressedAndTheAgentKeepsAnswering(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	c.OK("POST", "/api/agent", map[string]any{"name": "Long talker", "slug": "long-talker",
		"config_json": map[string]any{"context": map[string]any{"summary_threshold": 1, "summary_keep_messages": 2,
			"summary_tool_result_token_limit": 50, "summary_l2_trigger_ratio": 0.5}}})
	var mu sync.Mutex
	var lastSystem string
	summaries := 0
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if req.Messages[0].Content == agent.DefaultSummaryPrompt {
			summaries++
			return llmtest.Text(fmt.Sprintf("SUMMARY %d: the user sent long turns about topics.", summaries))
		}
		lastSystem = req.Messages[0].Content
		last := req.Messages[len(req.Messages)-1].Content
		return llmtest.Text("answer to " + last[:6])
	})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "long-talker", "title": "long"})["id"].(string)
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 80) // ~540 tokens
	compressed := false
	for i := 1; i <= 4; i++ {
		q := fmt.Sprintf("turn%d %s", i, filler)
		runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": q, "agent_slug": "long-talker", "thread_id": th})["run_id"].(string)
		events := c.Collect(runID, 60*time.Second)
		if r := testkit.Render(events); r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), fmt.Sprintf("answer to turn%d", i)) {
			t.Fatalf("turn %d: %+v", i, r)
		}
		for _, e := range events {
			if e.Event == "custom" && e.Payload()["name"] == "yuxi.context_compression" {
				chunk, _ := e.Payload()["chunk"].(map[string]any)
				if chunk["phase"] == "completed" && chunk["level"] == "l2" {
					compressed = true
				}
			}
		}
	}
	if !compressed {
		t.Fatal("no context_compression completed event with level l2")
	}
	mu.Lock()
	sys := lastSystem
	mu.Unlock()
	if !strings.Contains(sys, "<conversation_summary>") || !strings.Contains(sys, "SUMMARY") {
		t.Errorf("the model's last context has no summary: %q", sys)
	}
	var n int
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM context_summaries`).Scan(&n); err != nil || n < 1 {
		t.Errorf("stored summaries: %d %v", n, err)
	}
	var first string
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT m.content FROM messages m JOIN conversations c ON c.id = m.conversation_id
		WHERE c.thread_id = $1 AND m.role = 'user' ORDER BY m.id LIMIT 1`, th).Scan(&first); err != nil || !strings.HasPrefix(first, "turn1 ") || len(first) < len(filler) {
		t.Errorf("stored first message changed: %d bytes %v", len(first), err)
	}
}
