package web

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestWebBench is `make bench-web` (called by make bench): the figures of
// browser/bench.mjs against the whole platform with a scripted model. It
// runs only when YUXI_WEB_BENCH=1 (a measurement, not a check) and prints
// the figures; it fails only when the bench could not run.
func TestWebBench(t *testing.T) {
	if os.Getenv("YUXI_WEB_BENCH") != "1" {
		t.Skip("the web bench runs with YUXI_WEB_BENCH=1 (make bench-web)")
	}
	root := testkit.RepoRoot(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is missing: make chromium")
	}
	build := exec.Command("make", "-s", "web")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make web: %v\n%s", err, out)
	}
	p := testkit.StartLocal(t, nil, local.WithWeb(filepath.Join(root, "web", "dist")))
	p.LLM.Handle(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.Text("Here is ", "a streamed ", "answer with ", "**Markdown**, ", "`code` and ", "a list:\n\n- one\n- two\n")
	})
	big := p.Admin.Thread()
	p.Admin.OK("PUT", "/api/chat/thread/"+big, map[string]any{"title": "1,000 messages"})
	seedHistory(t, p, big, 1000)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "bench.mjs")
	cmd.Dir = filepath.Join(root, "tests", "web", "browser")
	cmd.Env = append(os.Environ(), "BASE_URL="+p.URL, "TOKEN="+p.Admin.Token, "BIG_THREAD="+big, "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("web bench:\n%s", out.String())
	if err != nil {
		t.Fatalf("the web bench failed: %v", err)
	}
}
