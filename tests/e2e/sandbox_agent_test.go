package e2e

// The agent's file-system and sandbox tools in a real run of the local
// platform, on a real sandbox provisioner with the bwrap backend: a
// scripted model writes a Python script to outputs/, runs it with execute,
// and reads the result back; the files are on the provisioner's volume
// under the run's thread and user, and the user's agent env
// (/api/user/agent-env) is in the sandbox's environment.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestAgentWritesRunsAndReadsInItsSandbox(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	const script = "print('total', sum(range(1, 11)))\n"
	const query = "compute the sum of 1..10 with python"
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() != query {
			return llmtest.Text("?")
		}
		tools := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				tools++
			}
		}
		switch tools {
		case 0:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_w", Name: "write_file",
				Arguments: `{"file_path":"/home/gem/user-data/outputs/sum.py","content":"print('total', sum(range(1, 11)))\n"}`})
		case 1:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_x", Name: "execute",
				Arguments: `{"command":"python3 /home/gem/user-data/outputs/sum.py > /home/gem/user-data/outputs/sum.txt && id -u && echo \"$MY_SANDBOX_VAR\""}`})
		case 2:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_r", Name: "read_file", Arguments: `{"file_path":"outputs/sum.txt"}`})
		}
		last := req.Messages[len(req.Messages)-1]
		return llmtest.Text("result: " + strings.TrimSpace(last.Content))
	})
	// The user's agent env is injected into their sandbox.
	p.Admin.OK("PUT", "/api/user/agent-env", map[string]any{"env": map[string]any{"MY_SANDBOX_VAR": "from-agent-env"}})
	th := p.Admin.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "sandbox"})["id"].(string)
	// always_trust: write_file and execute run without waiting for approval
	// (approval_test.go and TestAgentRunsAScriptAfterApproval cover the default mode).
	in := p.Admin.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th,
		"tool_approval_mode": "always_trust"})
	runID, _ := in["run_id"].(string)
	r := testkit.Render(p.Admin.Collect(runID, 60*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("run %s: %+v", runID, r)
	}
	texts := strings.Join(r.Texts(), "")
	if !strings.Contains(texts, "result: 1\ttotal 55") {
		t.Fatalf("answer %q", texts)
	}
	reqs := modelRequestsFor(t, p, query)
	msgs := testkit.ToolMessages(reqs[len(reqs)-1])
	if !strings.HasPrefix(msgs["call_w"], "Wrote ") || msgs["call_x"] != "1000\nfrom-agent-env\n[exit code 0]" {
		t.Fatalf("tool results the model read: %q", msgs)
	}
	// The files are on the volume, in the thread's outputs.
	scope := sandbox.Scope{UID: uidOf(t, p), FileThread: th}
	if got, err := os.ReadFile(sb.HostPath(scope, sandbox.OutputsDir+"/sum.py")); err != nil || string(got) != script {
		t.Fatalf("sum.py on the volume: %q %v", got, err)
	}
	if got, err := os.ReadFile(sb.HostPath(scope, sandbox.OutputsDir+"/sum.txt")); err != nil || string(got) != "total 55\n" {
		t.Fatalf("sum.txt on the volume: %q %v", got, err)
	}
}

// uidOf is the admin's user id, the scope's uid.
func uidOf(t *testing.T, p *testkit.Local) string {
	t.Helper()
	var uid string
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT uid FROM users WHERE username = 'admin' OR uid = 'admin' LIMIT 1`).Scan(&uid); err != nil {
		t.Fatalf("admin uid: %v", err)
	}
	return uid
}

// TestAgentRunsAScriptAfterApproval is issue 8's approval flow on a real
// sandbox (bwrap): in the default mode the scripted model's write_file of a
// Python script to outputs/ interrupts the run; the user approves, the file
// is written; its execute interrupts again; the user approves, the script
// runs once and the model answers with its output.
func TestAgentRunsAScriptAfterApproval(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	const query = "write hello.py and run it"
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		tools := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				tools++
			}
		}
		switch tools {
		case 0:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_w", Name: "write_file",
				Arguments: `{"file_path":"/home/gem/user-data/outputs/hello.py","content":"import sys\nprint('hello from', sys.version_info[0])\nopen('/home/gem/user-data/outputs/runs.log','a').write('ran\\n')\n"}`})
		case 1:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_x", Name: "execute", Arguments: `{"command":"python3 /home/gem/user-data/outputs/hello.py"}`})
		}
		return llmtest.Text("output: " + strings.TrimSpace(req.Messages[len(req.Messages)-1].Content))
	})
	c := p.Admin
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "approve a script"})["id"].(string)
	scope := sandbox.Scope{UID: uidOf(t, p), FileThread: th}
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th})["run_id"].(string)
	for i, want := range []string{"write_file", "execute"} {
		r := testkit.Render(c.Collect(runID, 60*time.Second))
		chunk, _ := r.Interrupt["chunk"].(map[string]any)
		appr, _ := chunk["approval"].(map[string]any)
		reqs, _ := appr["action_requests"].([]any)
		if r.EndStatus != "interrupted" || len(reqs) != 1 || reqs[0].(map[string]any)["name"] != want {
			t.Fatalf("run %d (%s): %+v", i, runID, r)
		}
		if i == 0 {
			if _, err := os.Stat(sb.HostPath(scope, sandbox.OutputsDir+"/hello.py")); !os.IsNotExist(err) {
				t.Fatalf("hello.py written before approval: %v", err)
			}
		}
		if _, err := os.Stat(sb.HostPath(scope, sandbox.OutputsDir+"/runs.log")); !os.IsNotExist(err) {
			t.Fatalf("script ran before approval: %v", err)
		}
		runID = c.OK("POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "created_by_run_id": runID,
			"resume": map[string]any{"decisions": []map[string]any{{"type": "approve"}}}})["run_id"].(string)
	}
	r := testkit.Render(c.Collect(runID, 60*time.Second))
	if r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), "output: hello from 3") {
		t.Fatalf("final run %s: %+v %q", runID, r, r.Texts())
	}
	if got, err := os.ReadFile(sb.HostPath(scope, sandbox.OutputsDir+"/runs.log")); err != nil || string(got) != "ran\n" {
		t.Fatalf("the script ran %q (%v), want once", got, err)
	}
}
