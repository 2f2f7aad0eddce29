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
	in := p.Admin.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th})
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
