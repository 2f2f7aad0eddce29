package e2e

// install_skill end to end with the scripted model on a real sandbox
// provisioner: a user's agent writes a SKILL.md into the thread's sandbox
// and installs it, then installs one skill of an allow-listed remote
// source; both land in the user's own workspace (not another user's), are
// active from the next model turn (their SKILL.md in the system prompt),
// and a source off the allow-list is refused as a tool error.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

func TestAgentInstallsPersonalSkills(t *testing.T) {
	t.Parallel()
	archive := zipFiles(t, map[string]string{
		"skills-repo-main/tapir/SKILL.md":    "---\nname: tapir-notes\ndescription: Notes about tapirs.\n---\n# Tapir notes\nTapirs browse at dusk.\n",
		"skills-repo-main/tapir/notes.md":    "Tapirs are odd-toed ungulates.\n",
		"skills-repo-main/capybara/SKILL.md": "---\nname: capybara-facts\ndescription: Capybara facts.\n---\n# Capybara\n",
	})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/repo.zip" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write(archive)
	}))
	t.Cleanup(web.Close)
	port := web.URL[strings.LastIndex(web.URL, ":")+1:]

	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32", "YUXI_SKILL_SOURCE_HOSTS": web.URL},
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	admin := p.Admin
	ivy := admin.NewUser("ivy")

	const query = "Install a heron skill and the tapir skill."
	const heronPath = "/home/gem/user-data/outputs/heron/SKILL.md"
	heronMD := "---\nname: heron-notes\ndescription: Notes about herons.\n---\n# Heron notes\nHerons stand still for a long time.\n"
	var mu sync.Mutex
	var systems []string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() != query {
			return llmtest.Text("?")
		}
		mu.Lock()
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			systems = append(systems, req.Messages[0].Content)
		} else {
			systems = append(systems, "")
		}
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role != "tool":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_write", Name: "write_file",
				Arguments: `{"file_path":"` + heronPath + `","content":` + installQuote(heronMD) + `}`})
		case last.ToolCallID == "call_write":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_heron", Name: "install_skill", Arguments: `{"source":"` + heronPath + `"}`})
		case last.ToolCallID == "call_heron":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_tapir", Name: "install_skill",
				Arguments: `{"source":"` + web.URL + `/repo.zip","skills":["tapir-notes"]}`})
		case last.ToolCallID == "call_tapir":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_off", Name: "install_skill",
				Arguments: `{"source":"https://127.0.0.2:` + port + `/repo.zip","skills":["tapir-notes"]}`})
		}
		return llmtest.Text("done")
	})
	th := ivy.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "skills"})["id"].(string)
	runID := ivy.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th,
		"tool_approval_mode": "always_trust"})["run_id"].(string)
	r := testkit.Render(ivy.Collect(runID, 90*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	reqs := modelRequestsFor(t, p, query)
	msgs := testkit.ToolMessages(reqs[len(reqs)-1])
	if !strings.Contains(msgs["call_heron"], `"installed":true`) || !strings.Contains(msgs["call_heron"], "heron-notes") {
		t.Errorf("install from the sandbox: %q", msgs["call_heron"])
	}
	if !strings.Contains(msgs["call_tapir"], `"installed":true`) || !strings.Contains(msgs["call_tapir"], "tapir-notes") {
		t.Errorf("install from the remote source: %q", msgs["call_tapir"])
	}
	if !strings.Contains(msgs["call_off"], "remote_source_forbidden") {
		t.Errorf("a source off the allow-list: %q", msgs["call_off"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(systems) != 5 {
		t.Fatalf("model requests: %d", len(systems))
	}
	// Active from the next turn: the installed SKILL.md is in the system prompt.
	if strings.Contains(systems[1], "Herons stand still") || !strings.Contains(systems[2], "Herons stand still") ||
		strings.Contains(systems[2], "Tapirs browse at dusk") || !strings.Contains(systems[3], "Tapirs browse at dusk") {
		t.Errorf("system prompts around the installs:\n%q\n%q\n%q", systems[1], systems[2], systems[3])
	}
	// In ivy's workspace, not the admin's.
	if f := ivy.OK("GET", "/api/skills/personal/tapir-notes/file?path=notes.md", nil)["data"].(map[string]any); f["content"] != "Tapirs are odd-toed ungulates.\n" {
		t.Errorf("ivy's tapir skill: %v", f)
	}
	if f := ivy.OK("GET", "/api/skills/personal/heron-notes/file?path=SKILL.md", nil)["data"].(map[string]any); f["content"] != heronMD {
		t.Errorf("ivy's heron skill: %v", f)
	}
	if res := admin.Do("GET", "/api/skills/personal/heron-notes/file?path=SKILL.md", nil); res.Status != http.StatusNotFound {
		t.Errorf("the admin's workspace has it: %d %s", res.Status, res.Body)
	}
}

func installQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
