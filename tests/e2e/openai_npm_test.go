package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestOpenAINpmClient runs tests/e2e/openai-npm/check.mjs — the official
// openai npm client — against the platform. `make test` installs the
// package (make npm-deps); without it this test fails rather than skips.
func TestOpenAINpmClient(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(testkit.RepoRoot(t), "tests", "e2e", "openai-npm")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run make npm-deps (make test does)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatal("the openai npm package is not installed: run make npm-deps (make test does)")
	}
	p := testkit.StartLocal(t, nil)
	secret := p.Admin.APIKey("npm")
	p.LLM.Enqueue(
		llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Remembered."}}, Usage: &llmtest.Usage{PromptTokens: 6, CompletionTokens: 2, TotalTokens: 8}},
		llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Str"}, {Content: "eamed"}}, Usage: &llmtest.Usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}},
		llmtest.Text("The code is 1234."),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "YUXI_BASE_URL="+p.URL+"/v1", "YUXI_API_KEY="+secret)
	outb, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("check.mjs: %v\n%s\n%s", err, outb, stderr)
	}
	var out struct {
		Models     []string `json:"models"`
		Completion struct {
			Object, Content, Finish string
			TotalTokens             int `json:"total_tokens"`
		} `json:"completion"`
		Stream struct {
			Content, Finish string
			TotalTokens     int `json:"total_tokens"`
			Chunks          int
		} `json:"stream"`
		AuthError *struct {
			Status         int
			Authentication bool
			Type           string
		} `json:"auth_error"`
		Continued struct{ Content string } `json:"continued"`
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("check.mjs output %q: %v", outb, err)
	}
	if !slices.Contains(out.Models, "default-chatbot") {
		t.Errorf("models: %v", out.Models)
	}
	if out.Completion.Object != "chat.completion" || out.Completion.Content != "Remembered." || out.Completion.Finish != "stop" || out.Completion.TotalTokens != 8 {
		t.Errorf("completion: %+v", out.Completion)
	}
	if out.Stream.Content != "Streamed" || out.Stream.Finish != "stop" || out.Stream.TotalTokens != 6 || out.Stream.Chunks < 3 {
		t.Errorf("stream: %+v", out.Stream)
	}
	if out.AuthError == nil || out.AuthError.Status != 401 || !out.AuthError.Authentication || out.AuthError.Type != "authentication_error" {
		t.Errorf("auth error: %+v", out.AuthError)
	}
	if out.Continued.Content != "The code is 1234." {
		t.Errorf("continued: %+v", out.Continued)
	}
	// The continued turn saw the first one: the same thread.
	reqs := p.LLM.Requests()
	last := reqs[len(reqs)-1]
	var saw bool
	for _, m := range last.Messages {
		saw = saw || (m.Role == "assistant" && m.Content == "Remembered.")
	}
	if !saw || last.LastUserMessage() != "what is the code?" {
		t.Errorf("the continued conversation lost its first turn: %+v", last.Messages)
	}
}
