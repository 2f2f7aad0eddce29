package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestCLIAgentEval drives `yuxi agent eval` against the platform: a stored
// suite (the platform runs it; the command follows the run) and a local
// JSONL of samples through the blocking eval route, per-item lines and a
// summary, --json, exit 1 when an item failed, usage mistakes exit 2.
func TestCLIAgentEval(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/cli/cmd/yuxi")
	p := testkit.StartLocal(t, nil)
	p.LLM.Handle(suiteModel)
	home := t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	mustRun := func(args ...string) {
		t.Helper()
		if out, errs, code := run(args...); code != 0 {
			t.Fatalf("yuxi %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	mustRun("remote", "add", "local", p.URL)
	mustRun("login", "--api-key", p.Admin.APIKey("cli-eval"))

	// Usage mistakes.
	for _, args := range [][]string{{"agent", "eval"}, {"agent", "eval", "--file", "x.jsonl"}, {"agent", "eval", "--suite", "s", "--file", "f"},
		{"agent", "eval", "--suite", "s", "--max-concurrency", "99"}, {"agent", "frobnicate"}} {
		if _, errs, code := run(args...); code != 2 || !strings.HasPrefix(errs, "yuxi: ") {
			t.Errorf("yuxi %v: exit %d %q, want 2", args, code, errs)
		}
	}

	// A stored suite: all items pass → exit 0, text lines and summary.
	suiteID := p.Admin.Data("POST", "/api/evaluation/suites", map[string]any{"name": "cli suite", "agent_slug": "default-chatbot",
		"items": []map[string]any{
			{"input": "What is the capital of France?", "checks": []map[string]any{{"type": "contains", "value": "Paris"}}},
			{"input": "please use a tool"},
		}}).(map[string]any)["suite_id"].(string)
	out, errs, code := run("agent", "eval", "--suite", suiteID, "--experiment-name", "cli-run-1", "--poll", "50ms")
	if code != 0 || !strings.Contains(out, "PASS") || !strings.Contains(out, "passed 2 of 2 (100.0%)") || !strings.Contains(errs, "started run srun_") {
		t.Fatalf("suite eval: exit %d\n%s%s", code, out, errs)
	}
	// --json, and a failing item: exit 1 with the count.
	p.Admin.Data("PUT", "/api/evaluation/suites/"+suiteID, map[string]any{"items": []map[string]any{
		{"input": "What is the capital of France?", "checks": []map[string]any{{"type": "contains", "value": "Paris"}}},
		{"input": "something obscure", "checks": []map[string]any{{"type": "contains", "value": "never-there"}}},
	}})
	out, errs, code = run("--json", "agent", "eval", "--suite", suiteID, "--poll", "50ms")
	var rep struct {
		RunID   string           `json:"run_id"`
		Status  string           `json:"status"`
		Items   []map[string]any `json:"items"`
		Summary map[string]any   `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %q: %v", out, err)
	}
	if code != 1 || !strings.Contains(errs, "1 of 2 items failed") || rep.Status != "completed" || rep.Summary["pass_rate"] != 0.5 ||
		len(rep.Items) != 2 || rep.Items[0]["passed"] != true || rep.Items[1]["output"] != "no idea" {
		t.Fatalf("failing suite eval: exit %d %q\n%s", code, errs, out)
	}
	if _, errs, code := run("agent", "eval", "--suite", "suite_000000000000"); code != 1 || !strings.Contains(errs, "suite_not_found") {
		t.Errorf("unknown suite: exit %d %q", code, errs)
	}

	// A local JSONL through eval/runs, two at once.
	dir := t.TempDir()
	samples := filepath.Join(dir, "samples.jsonl")
	if err := os.WriteFile(samples, []byte(`{"question": "What is the capital of France?", "checks": [{"type": "regex", "pattern": "^Par"}]}
{"input": "answer in json", "checks": [{"type": "contains", "value": "answer"}]}
{"prompt": "please use a tool"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var fileRep struct {
		Items   []map[string]any `json:"items"`
		Summary map[string]any   `json:"summary"`
	}
	out, errs, code = run("--json", "agent", "eval", "--file", samples, "--agent-slug", "default-chatbot", "--max-concurrency", "2",
		"--experiment-name", "local-1")
	if err := json.Unmarshal([]byte(out), &fileRep); err != nil || code != 0 {
		t.Fatalf("file eval: exit %d %q %q: %v", code, out, errs, err)
	}
	if fileRep.Summary["passed"] != 3.0 || fileRep.Items[2]["trajectory_summary"].(map[string]any)["tool_call_count"] != 1.0 ||
		fileRep.Items[0]["output"] != "Paris" {
		t.Fatalf("file eval: %s", out)
	}
	runID := fileRep.Items[0]["agent_run_id"].(string)
	if ar := p.Admin.OK("GET", "/api/agent/runs/"+runID, nil)["run"].(map[string]any); ar["source"] != "agent_evaluation" {
		t.Errorf("sample run source: %v", ar["source"])
	}
	// The same experiment again replays the finished samples (same runs).
	out, _, code = run("--json", "agent", "eval", "--file", samples, "--agent-slug", "default-chatbot", "--experiment-name", "local-1")
	if err := json.Unmarshal([]byte(out), &fileRep); err != nil || code != 0 || fileRep.Items[0]["agent_run_id"] != runID {
		t.Fatalf("replayed experiment: exit %d %s", code, out)
	}
	// Bad lines are one clear error.
	bad := filepath.Join(dir, "bad.jsonl")
	_ = os.WriteFile(bad, []byte(`{"input": "x", "checks": [{"type": "judge", "prompt": "p"}]}`+"\n"), 0o644)
	if _, errs, code := run("agent", "eval", "--file", bad, "--agent-slug", "default-chatbot"); code != 1 || !strings.Contains(errs, "line 1") {
		t.Errorf("bad samples: exit %d %q", code, errs)
	}
	// Text output of a failing file eval.
	failing := filepath.Join(dir, "failing.jsonl")
	_ = os.WriteFile(failing, []byte(`{"input": "something obscure", "checks": [{"type": "contains", "value": "never-there"}]}`+"\n"), 0o644)
	if out, errs, code := run("agent", "eval", "--file", failing, "--agent-slug", "default-chatbot"); code != 1 || !strings.Contains(out, "FAIL") ||
		!strings.Contains(out, "passed 0 of 1") || !strings.Contains(errs, "1 of 1 items failed") {
		t.Errorf("failing file eval: exit %d\n%s%s", code, out, errs)
	}
}
