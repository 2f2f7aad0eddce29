package sandboxtool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// recorder is an in-memory ArtifactRecorder (the thread store's is tested
// end to end in tests/e2e).
type recorder struct{ calls [][]string }

func (r *recorder) RecordArtifacts(_ context.Context, uid, threadID, runID, toolCallID string, paths []string) error {
	r.calls = append(r.calls, append([]string{uid, threadID, runID, toolCallID}, paths...))
	return nil
}

func TestPresentArtifactsOnlyOutputs(t *testing.T) {
	t.Parallel()
	w := provisionertest.Start(t, provisioner.Config{})
	rec := &recorder{}
	k := &kit{w: w, tools: map[string]tool.Tool{}, scope: sandbox.Scope{UID: "alice", FileThread: "thread-1"}}
	for _, tl := range sandboxtool.New(w.Client, sandboxtool.Config{ExecTimeout: 30 * time.Second, Artifacts: rec}) {
		k.tools[tl.Spec().Name] = tl
	}
	for _, f := range []string{"outputs/report.md", "outputs/large_tool_results/call_1", "uploads/in.txt", "workspace/w.txt", "outputs/sub/x.csv"} {
		if res := k.call(t, "write_file", map[string]any{"file_path": f, "content": "x"}); res.IsError {
			t.Fatalf("write %s: %+v", f, res)
		}
	}
	refused := map[string]string{
		"/home/gem/user-data/uploads/in.txt":                 "only outputs",
		"workspace/w.txt":                                    "only outputs",
		"outputs/../uploads/in.txt":                          "only outputs",
		"/home/gem/user-data/outputs":                        "only outputs",
		"outputs/large_tool_results/call_1":                  "internal file",
		"/home/gem/user-data/outputs/conversation_history/a": "internal file",
		"outputs/missing.md":                                 "not_found",
		"outputs/sub":                                        "is a directory",
		"/etc/passwd":                                        "only outputs",
		"/home/gem/user-data/outputs/../../../../etc/passwd": "only outputs",
	}
	for p, want := range refused {
		res := k.call(t, "present_artifacts", map[string]any{"filepaths": []string{"outputs/report.md", p}})
		if !res.IsError || !strings.Contains(res.Output, want) {
			t.Errorf("present %q: %+v, want an error naming %q", p, res, want)
		}
	}
	if len(rec.calls) != 0 {
		t.Fatalf("a refused call recorded %v", rec.calls)
	}
	res := k.call(t, "present_artifacts", map[string]any{"filepaths": []string{"outputs/report.md", "/home/gem/user-data/outputs/sub/x.csv", "outputs/./report.md"}}, "call_present")
	if res.IsError || res.Output != "Presented to the user: /home/gem/user-data/outputs/report.md, /home/gem/user-data/outputs/sub/x.csv" {
		t.Fatalf("present: %+v", res)
	}
	if got := strings.Join(rec.calls[0], " "); len(rec.calls) != 1 || got != "alice thread-1 run_1 call_present /home/gem/user-data/outputs/report.md /home/gem/user-data/outputs/sub/x.csv" {
		t.Fatalf("recorded %v", rec.calls)
	}
	if res := k.call(t, "present_artifacts", map[string]any{"filepaths": []string{}}); !res.IsError {
		t.Fatalf("empty filepaths: %+v", res)
	}
}

// execute runs in /home/gem/user-data: relative outputs/… is the thread's outputs.
func TestExecuteRunsInUserData(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	res := k.call(t, "execute", map[string]any{"command": "pwd && echo hi > outputs/rel.txt && ls"})
	if res.IsError || !strings.HasPrefix(res.Output, "/home/gem/user-data\n") {
		t.Fatalf("execute: %+v", res)
	}
	for _, d := range []string{"outputs", "uploads", "workspace"} {
		if !strings.Contains(res.Output, "\n"+d+"\n") {
			t.Errorf("ls of user-data lacks %s: %q", d, res.Output)
		}
	}
	if got := k.call(t, "read_file", map[string]any{"file_path": "/home/gem/user-data/outputs/rel.txt"}); !strings.Contains(got.Output, "hi") {
		t.Fatalf("outputs/rel.txt: %+v", got)
	}
}
