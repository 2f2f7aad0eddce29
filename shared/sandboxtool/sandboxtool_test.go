package sandboxtool_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

type kit struct {
	w     *provisionertest.World
	tools map[string]tool.Tool
	scope sandbox.Scope
	n     int
}

func newKit(t *testing.T) *kit {
	t.Helper()
	w := provisionertest.Start(t, provisioner.Config{})
	k := &kit{w: w, tools: map[string]tool.Tool{}, scope: sandbox.Scope{UID: "alice", FileThread: "thread-1"}}
	for _, tl := range sandboxtool.New(w.Client, sandboxtool.Config{ExecTimeout: 30 * time.Second}) {
		k.tools[tl.Spec().Name] = tl
	}
	return k
}

// call invokes a tool with a new tool call id (or the given one).
func (k *kit) call(t *testing.T, name string, args map[string]any, id ...string) tool.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	k.n++
	callID := "call_" + strings.Repeat("x", k.n)
	if len(id) > 0 {
		callID = id[0]
	}
	res, err := k.tools[name].Invoke(context.Background(), tool.Call{RunID: "run_1", ToolCallID: callID, ThreadID: k.scope.FileThread, UID: k.scope.UID, Arguments: string(raw)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func TestSpecs(t *testing.T) {
	names := map[string]string{}
	for _, s := range sandboxtool.Specs() {
		names[s.Name] = s.Category
		var schema map[string]any
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s: %v", s.Name, s.Parameters, err)
		}
	}
	want := map[string]string{"read_file": "filesystem", "write_file": "filesystem", "edit_file": "filesystem", "ls": "filesystem",
		"glob": "filesystem", "grep": "filesystem", "execute": "sandbox", "present_artifacts": "filesystem", "ocr_parse_file": "filesystem"}
	if len(names) != len(want) {
		t.Fatalf("tools %v", names)
	}
	for n, c := range want {
		if names[n] != c {
			t.Errorf("%s: category %q, want %q", n, names[n], c)
		}
	}
}

func TestWriteReadEditRunPython(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	script := "import sys\nprint('sum', sum(range(10)))\nprint('argv', sys.argv[1:])\n"
	res := k.call(t, "write_file", map[string]any{"file_path": "/home/gem/user-data/outputs/calc.py", "content": script}, "call_write")
	if res.IsError || !strings.Contains(res.Output, "Wrote") {
		t.Fatalf("write_file: %+v", res)
	}
	if got, _ := os.ReadFile(k.w.HostPath(k.scope, sandbox.OutputsDir+"/calc.py")); string(got) != script {
		t.Fatalf("on the volume: %q", got)
	}
	// The same call redelivered: done, not "exists".
	if res := k.call(t, "write_file", map[string]any{"file_path": "/home/gem/user-data/outputs/calc.py", "content": script}, "call_write"); res.IsError {
		t.Fatalf("replayed write_file: %+v", res)
	}
	if res := k.call(t, "write_file", map[string]any{"file_path": "outputs/calc.py", "content": "other"}); !res.IsError || !strings.Contains(res.Output, "already exists") {
		t.Fatalf("write over an existing file: %+v", res)
	}
	res = k.call(t, "read_file", map[string]any{"file_path": "outputs/calc.py", "offset": 1, "limit": 1})
	if res.IsError || res.Output != "     2\tprint('sum', sum(range(10)))\n… (1 more lines; read on with offset 2)\n" {
		t.Fatalf("read_file window: %q", res.Output)
	}
	res = k.call(t, "edit_file", map[string]any{"file_path": "outputs/calc.py", "old_string": "range(10)", "new_string": "range(101)"}, "call_edit")
	if res.IsError {
		t.Fatalf("edit_file: %+v", res)
	}
	if res := k.call(t, "edit_file", map[string]any{"file_path": "outputs/calc.py", "old_string": "range(10)", "new_string": "range(101)"}, "call_edit"); res.IsError {
		t.Fatalf("replayed edit_file: %+v", res)
	}
	if res := k.call(t, "edit_file", map[string]any{"file_path": "outputs/calc.py", "old_string": "print", "new_string": "echo"}); !res.IsError || !strings.Contains(res.Output, "occurs 2 times") {
		t.Fatalf("ambiguous edit: %+v", res)
	}
	res = k.call(t, "execute", map[string]any{"command": "python3 outputs/calc.py a b > outputs/result.txt; cat outputs/result.txt; exit 3"})
	if res.Output != "sum 5050\nargv ['a', 'b']\n[exit code 3]" {
		t.Fatalf("execute: %q", res.Output)
	}
	res = k.call(t, "ls", map[string]any{"path": "outputs"})
	if !strings.Contains(res.Output, "/home/gem/user-data/outputs/calc.py (") || !strings.Contains(res.Output, "/home/gem/user-data/outputs/result.txt (") {
		t.Fatalf("ls: %q", res.Output)
	}
	if res := k.call(t, "glob", map[string]any{"pattern": "**/*.py"}); res.Output != "/home/gem/user-data/outputs/calc.py\n" {
		t.Fatalf("glob: %q", res.Output)
	}
	if res := k.call(t, "grep", map[string]any{"pattern": "sum \\d+", "output_mode": "content"}); res.Output != "/home/gem/user-data/outputs/result.txt:1: sum 5050\n" {
		t.Fatalf("grep content: %q", res.Output)
	}
	if res := k.call(t, "grep", map[string]any{"pattern": "print", "output_mode": "count"}); res.Output != "/home/gem/user-data/outputs/calc.py: 2\n" {
		t.Fatalf("grep count: %q", res.Output)
	}
	if res := k.call(t, "read_file", map[string]any{"file_path": "uploads/scan.pdf"}); res.IsError || !strings.Contains(res.Output, "ocr_parse_file") {
		t.Fatalf("read_file of a PDF: %+v", res)
	}
}

func TestExecuteIdempotentByToolCallID(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	for range 2 {
		res := k.call(t, "execute", map[string]any{"command": "echo once >> outputs/log.txt; wc -l < outputs/log.txt"}, "call_exec_1")
		if res.Output != "1\n[exit code 0]" {
			t.Fatalf("execute (redelivered): %q", res.Output)
		}
	}
	if res := k.call(t, "execute", map[string]any{"command": "echo again >> outputs/log.txt; wc -l < outputs/log.txt"}); res.Output != "2\n[exit code 0]" {
		t.Fatalf("a new call: %q", res.Output)
	}
	res := k.call(t, "execute", map[string]any{"command": "sleep 20", "timeout": 1})
	if !res.IsError || !strings.Contains(res.Output, "timed out") {
		t.Fatalf("timeout: %+v", res)
	}
	res = k.call(t, "execute", map[string]any{"command": "head -c 300000 /dev/zero | tr '\\0' a"})
	if !strings.Contains(res.Output, "[output truncated at 262144 bytes]") || len(res.Output) < 262144 {
		t.Fatalf("output cap: %d bytes, tail %q", len(res.Output), res.Output[len(res.Output)-60:])
	}
}

func TestPathRulesAreToolErrors(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	if res := k.call(t, "execute", map[string]any{"command": "ln -s / outputs/root && echo ok"}); !strings.HasPrefix(res.Output, "ok") {
		t.Fatalf("symlink: %q", res.Output)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"write_file", map[string]any{"file_path": "/home/gem/skills/x.md", "content": "x"}},
		{"write_file", map[string]any{"file_path": "/etc/passwd", "content": "x"}},
		{"write_file", map[string]any{"file_path": "outputs/../../x", "content": "x"}},
		{"read_file", map[string]any{"file_path": "outputs/root/etc/passwd"}},
		{"read_file", map[string]any{"file_path": "outputs/missing.txt"}},
		{"edit_file", map[string]any{"file_path": "outputs/root/etc/hosts", "old_string": "a", "new_string": "b"}},
		{"ls", map[string]any{"path": "outputs/root/etc"}},
		{"read_file", map[string]any{"bogus": 1}},
	} {
		if res := k.call(t, c.name, c.args); !res.IsError {
			t.Errorf("%s %v: %+v, want a tool error", c.name, c.args, res)
		}
	}
}

// An unreachable provisioner is retried for Config.UnavailableWait, then
// the model gets a clear sandbox_unavailable tool error (the run goes on);
// the call never hangs.
func TestProvisionerDownFailsTheCallClearly(t *testing.T) {
	t.Parallel()
	w := provisionertest.Start(t, provisioner.Config{})
	tools := map[string]tool.Tool{}
	for _, tl := range sandboxtool.New(w.Client, sandboxtool.Config{ExecTimeout: 30 * time.Second, UnavailableWait: 600 * time.Millisecond}) {
		tools[tl.Spec().Name] = tl
	}
	w.Server.Close()
	for name, raw := range map[string]string{"read_file": `{"file_path":"outputs/a.txt"}`, "execute": `{"command":"echo hi"}`} {
		start := time.Now()
		res, err := tools[name].Invoke(t.Context(), tool.Call{ToolCallID: "c-" + name, ThreadID: "t", UID: "u", Arguments: raw})
		took := time.Since(start)
		if err != nil || !res.IsError || !strings.Contains(res.Output, "sandbox_unavailable: the sandbox provisioner did not answer") || !strings.Contains(res.Output, name) {
			t.Errorf("%s with the provisioner down: %+v %v", name, res, err)
		}
		if took < 400*time.Millisecond || took > 10*time.Second {
			t.Errorf("%s answered after %s: want the wait (600ms) spent retrying, then an answer", name, took)
		}
	}
	// A cancelled call stops waiting at once and stays an error (retried).
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tools["ls"].Invoke(ctx, tool.Call{ToolCallID: "c-ls", ThreadID: "t", UID: "u", Arguments: `{"path":"outputs"}`}); err == nil {
		t.Error("a cancelled call answered without an error")
	}
}
