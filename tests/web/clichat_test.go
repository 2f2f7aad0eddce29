package web

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestCLIChatPageInChromium opens the page `yuxi chat --no-open` serves in a
// real Chromium (browser/clichat.mjs): the answer streams in, /state and a
// new session work, in light and dark, and the API key never reaches the
// browser.
func TestCLIChatPageInChromium(t *testing.T) {
	root, chromium := browserTools(t, false)

	bin := testkit.Build(t, "./infra/cli/cmd/yuxi")
	g := &gates{ch: map[string]chan struct{}{}}
	ctrl := httptest.NewServer(g)
	t.Cleanup(ctrl.Close)
	p := testkit.StartLocal(t, nil)
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		q := req.LastUserMessage()
		scheme, ok := strings.CutPrefix(q, "tell me a story (")
		if !ok {
			return llmtest.Text("OK.")
		}
		parts := []string{"Once upon a time, ", "a CLI ", "served a page. "}
		for i := 0; i < 6; i++ {
			parts = append(parts, "And it streamed. ")
		}
		r := llmtest.Text(append(parts, "THE END.")...)
		r.Block, r.BlockAfter = g.get("story-"+strings.TrimSuffix(scheme, ")")), 2
		return r
	})
	t.Cleanup(func() { g.release("story-light"); g.release("story-dark") })

	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	key := p.Admin.APIKey("cli-chat-browser")
	for _, args := range [][]string{{"remote", "add", "local", p.URL}, {"login", "--api-key", key}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("yuxi %v: %v\n%s", args, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	chat := exec.CommandContext(ctx, bin, "chat", "--no-open")
	chat.Env = env
	stdout, err := chat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chat.Process.Kill(); _ = chat.Wait() })
	sc := bufio.NewScanner(stdout)
	var link string
	for link == "" && sc.Scan() {
		link = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?t=[0-9a-f]+`).FindString(sc.Text())
	}
	if link == "" {
		t.Fatal("yuxi chat printed no address")
	}

	shots := filepath.Join(root, "tests", "web", "screenshots-clichat")
	node := exec.CommandContext(ctx, "node", "clichat.mjs")
	node.Dir = filepath.Join(root, "tests", "web", "browser")
	node.Env = append(os.Environ(), "CHAT_URL="+link, "API_KEY="+key, "CONTROL_URL="+ctrl.URL, "SHOTS="+shots, "CHROMIUM="+chromium)
	var out bytes.Buffer
	node.Stdout, node.Stderr = &out, &out
	err = node.Run()
	t.Logf("clichat output:\n%s", out.String())
	if err != nil {
		t.Fatalf("the yuxi chat page failed in Chromium: %v (screenshots in %s)", err, shots)
	}
}
