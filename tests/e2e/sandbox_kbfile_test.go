package e2e

// download_kb_file copies a knowledge-base file's original into the run's
// sandbox outputs, re-checking access: only files of knowledge bases the
// user reads and the agent enables; save_as loses its directories; the same
// bytes saved again reuse their path.

import (
	"encoding/json"
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

func TestDownloadKBFileCopiesTheOriginalIntoOutputs(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	admin := p.Admin
	handbook := admin.NewKnowledgeBase("handbook", "company handbook", testkit.GlobalReadShare())
	secret := admin.NewKnowledgeBase("secret", "board only", nil)
	fileOf := func(files map[string]map[string]any) string {
		for id := range files {
			return id
		}
		t.Fatal("no file ingested")
		return ""
	}
	policy := fileOf(admin.Ingest(handbook, map[string][]byte{"policy.md": []byte(kbVacationText)}, 30*time.Second))
	salaries := fileOf(admin.Ingest(secret, map[string][]byte{"salaries.md": []byte(kbSalariesText)}, 30*time.Second))
	alice := admin.NewUser("alice")
	alice.OK("POST", "/api/agent", map[string]any{"name": "KB files", "slug": "kb-files",
		"config_json": map[string]any{"context": map[string]any{"knowledges": []string{handbook, secret}}}})

	const query = "copy the policy for me"
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() != query {
			return llmtest.Text("?")
		}
		if req.Messages[len(req.Messages)-1].Role == "tool" {
			return llmtest.Text("done")
		}
		return llmtest.Calls(
			llmtest.ToolCall{ID: "call_a", Name: "download_kb_file", Arguments: `{"file_id":"` + policy + `"}`},
			llmtest.ToolCall{ID: "call_b", Name: "download_kb_file", Arguments: `{"file_id":"` + policy + `","save_as":"../../../etc/policy.md"}`},
			llmtest.ToolCall{ID: "call_c", Name: "download_kb_file", Arguments: `{"file_id":"` + salaries + `"}`},
			llmtest.ToolCall{ID: "call_d", Name: "download_kb_file", Arguments: `{"file_id":"no-such-file"}`})
	})
	th := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "kb-files", "title": "kb files"})["id"].(string)
	runID := alice.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "kb-files", "thread_id": th})["run_id"].(string)
	if r := testkit.Render(alice.Collect(runID, 60*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("run %s: %+v", runID, r)
	}
	reqs := modelRequestsFor(t, p, query)
	msgs := testkit.ToolMessages(reqs[len(reqs)-1])
	var a, b struct {
		Path      string `json:"path"`
		KBID      string `json:"kb_id"`
		SizeBytes int    `json:"size_bytes"`
	}
	if err := json.Unmarshal([]byte(msgs["call_a"]), &a); err != nil || a.Path != sandbox.OutputsDir+"/policy.md" || a.KBID != handbook || a.SizeBytes != len(kbVacationText) {
		t.Fatalf("call_a: %s", msgs["call_a"])
	}
	// save_as lost its directories; the same bytes under the same name reuse the path.
	if err := json.Unmarshal([]byte(msgs["call_b"]), &b); err != nil || b.Path != a.Path {
		t.Fatalf("call_b: %s", msgs["call_b"])
	}
	// alice cannot read the secret KB: its file does not exist for her.
	for _, id := range []string{"call_c", "call_d"} {
		if !strings.HasPrefix(msgs[id], "Error: ") || !strings.Contains(msgs[id], "not found") {
			t.Errorf("%s: %s", id, msgs[id])
		}
	}
	var uid string
	if err := p.P.App.Pool.QueryRow(t.Context(), `SELECT uid FROM users WHERE username = 'alice'`).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	scope := sandbox.ThreadScope(uid, th)
	if got, err := os.ReadFile(sb.HostPath(scope, sandbox.OutputsDir+"/policy.md")); err != nil || string(got) != kbVacationText {
		t.Fatalf("policy.md in outputs: %q %v", got, err)
	}
	entries, _ := os.ReadDir(sb.HostPath(scope, sandbox.OutputsDir))
	if len(entries) != 1 {
		t.Fatalf("outputs hold %d entries, want only policy.md", len(entries))
	}
}
