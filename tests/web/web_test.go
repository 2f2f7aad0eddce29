// Package web drives the web UI (web/) in a real Chromium against the whole
// platform with a scripted model: the journey of browser/journey.mjs and the
// later screens of browser/extras.mjs, with screenshots of every step in
// light and dark; and the local chat page of `yuxi chat` (browser/clichat.mjs).
//
// May import: tests/testkit, tests/mcpeverything, infra/local,
// infra/sandbox-provisioner (provisioner, provisionertest),
// shared/sandboxtool, shared/llm/llmtest.
package web

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// need skips locally and fails in CI when a tool is missing.
func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (make test installs it: make web chromium npm-deps)", what)
	}
	t.Skipf("%s is missing; run make web chromium npm-deps", what)
}

// gates are named holds on scripted answers that the journey releases.
type gates struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *gates) get(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.ch[name]
	if !ok {
		c = make(chan struct{})
		g.ch[name] = c
	}
	return c
}

func (g *gates) release(name string) {
	c := g.get(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

func (g *gates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/release/")
	if r.Method != http.MethodPost || !ok || name == "" {
		http.NotFound(w, r)
		return
	}
	g.release(name)
}

// script answers by the conversation: the journey's messages pick the reply.
func script(g *gates) func(llmtest.ChatRequest) llmtest.Reply {
	return func(req llmtest.ChatRequest) llmtest.Reply {
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
			if strings.Contains(req.Messages[n-1].Content, "kyoto") {
				return llmtest.Text("You chose ", "kyoto.")
			}
			if strings.Contains(req.Messages[n-1].Content, "rejected") {
				return llmtest.Text("Understood, ", "not marked.")
			}
			if strings.Contains(req.LastUserMessage(), "mark") {
				return llmtest.Text("Marked ", "for review.")
			}
			return llmtest.Text("Done.")
		}
		q := req.LastUserMessage()
		switch {
		case strings.Contains(q, "story"):
			parts := []string{"Once upon a time, ", "there was a platform ", "that streamed. "}
			for i := 0; i < 12; i++ {
				parts = append(parts, "And it went on. ")
			}
			parts = append(parts, "THE END.")
			r := llmtest.Text(parts...)
			r.Block, r.BlockAfter, r.Delay = g.get("story"), 3, 15*time.Millisecond
			return r
		case strings.Contains(q, "second question"):
			return llmtest.Text("Second ", "answer.")
		case strings.Contains(q, "trip"):
			return llmtest.Calls(llmtest.ToolCall{ID: "ask1", Name: "ask_user_question",
				Arguments: `{"questions":[{"question":"Which city?","options":[{"label":"Kyoto","value":"kyoto"},{"label":"Osaka","value":"osaka"}]}]}`})
		case strings.Contains(q, "mark"):
			return llmtest.Calls(llmtest.ToolCall{ID: "mark" + strings.Fields(q)[len(strings.Fields(q))-1], Name: "mark_for_improvement",
				Arguments: `{"reason":"` + q + `"}`})
		case strings.Contains(q, "slowly"):
			r := llmtest.Text("Thinking slowly", " and never finishing.")
			r.Block, r.BlockAfter = g.get("never"), 1
			return r
		}
		return llmtest.Text("OK.")
	}
}

// browserTools checks chromium, node and playwright-core and returns the
// repository root and chromium's path; with build, it builds the web UI as
// `make web` does (a no-op when web/dist is current).
func browserTools(t *testing.T, build bool) (root, chromium string) {
	t.Helper()
	root = testkit.RepoRoot(t)
	chromium, _ = exec.LookPath("chromium")
	need(t, "chromium", chromium != "")
	_, nodeErr := exec.LookPath("node")
	need(t, "node", nodeErr == nil)
	if build {
		mk := exec.Command("make", "-s", "web")
		mk.Dir = root
		if out, err := mk.CombinedOutput(); err != nil {
			need(t, "the web UI build (make web)", false)
			t.Fatalf("make web: %v\n%s", err, out)
		}
	}
	_, err := os.Stat(filepath.Join(root, "tests/web/browser/node_modules/playwright-core/package.json"))
	need(t, "playwright-core (npm ci in tests/web/browser)", err == nil)
	return root, chromium
}

// runScript runs browser/<script> with env (CHROMIUM and SHOTS added) and
// fails the test when it fails; its output is logged either way.
func runScript(t *testing.T, root, chromium, script, shots string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = filepath.Join(root, "tests", "web", "browser")
	cmd.Env = append(append(os.Environ(), "SHOTS="+shots, "CHROMIUM="+chromium), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s output:\n%s\nscreenshots in %s", script, out.String(), shots)
	if err != nil {
		t.Fatalf("%s failed: %v (screenshots, with failure.png, in %s)", script, err, shots)
	}
}

func TestWebJourneyInChromium(t *testing.T) {
	root, chromium := browserTools(t, true)

	g := &gates{ch: map[string]chan struct{}{}}
	ctrl := httptest.NewServer(g)
	t.Cleanup(ctrl.Close)
	// A real sandbox provisioner (bwrap) behind the thread files screen.
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartFirstRun(t, nil, local.WithWeb(filepath.Join(root, "web", "dist")),
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	p.LLM.Handle(script(g))
	t.Cleanup(func() { g.release("story"); g.release("never") }) // before the platform stops

	shots := filepath.Join(root, "tests", "web", "screenshots")
	_ = os.RemoveAll(shots)
	md := filepath.Join(t.TempDir(), "handbook.md")
	if err := os.WriteFile(md, []byte("# Handbook\n\nEmployees get 25 days of paid vacation per year.\n\n## Travel\n\nBook trains in second class.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(t.TempDir(), "budget.html")
	if err := os.WriteFile(html, []byte("<html><body><h1>Budget</h1><p>The pangolin budget is 42 coins.</p></body></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	runScript(t, root, chromium, "journey.mjs", shots, "BASE_URL="+p.URL, "CONTROL_URL="+ctrl.URL, "MD_FILE="+md, "HTML_FILE="+html)
}
