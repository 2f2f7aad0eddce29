package e2e

// The user's workspace prompt files (agents/AGENTS.md, USER.md,
// MEMORY.md) are appended to the system prompt, in that order, each cut at
// 64 KiB with a mark; a missing one is left out.

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestWorkspacePromptFilesJoinTheSystemPrompt(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 30 * time.Second}))
	alice := p.Admin.NewUser("alice")
	alice.OK("PUT", "/api/workspace/file", map[string]any{"path": "/agents/AGENTS.md", "content": "Always answer in haiku."})
	// USER.md over 64 KiB: a multi-byte character straddles the cut.
	big := strings.Repeat("a", 64<<10-1) + "é" + strings.Repeat("TAIL", 100)
	alice.OK("PUT", "/api/workspace/file", map[string]any{"path": "/agents/USER.md", "content": big})
	var system string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() == "hello" && len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			system = req.Messages[0].Content
		}
		return llmtest.Text("ok")
	})
	th := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "ws"})["id"].(string)
	id := alice.Submit(th, "hello", map[string]any{"agent_slug": "default-chatbot"})["run_id"].(string)
	if r := testkit.Render(alice.Collect(id, 30*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	a, u := strings.Index(system, "## AGENTS.md"), strings.Index(system, "## USER.md")
	if a < 0 || u < a || !strings.Contains(system, "Always answer in haiku.") {
		t.Fatalf("system prompt lacks the workspace files in order: %.300q", system)
	}
	if strings.Contains(system, "## MEMORY.md") {
		t.Errorf("a missing MEMORY.md is in the prompt")
	}
	if strings.Contains(system, "TAIL") || strings.Contains(system, "é") || !strings.Contains(system, "[USER.md truncated: only its first 64 KiB") {
		t.Errorf("USER.md not cut at 64 KiB with a mark: %q", system[len(system)-200:])
	}
	if n := strings.Count(system, "a"); n < 64<<10-1 {
		t.Errorf("USER.md's first 64 KiB are not all there (%d)", n)
	}
}
