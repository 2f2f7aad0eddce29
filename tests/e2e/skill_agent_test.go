package e2e

// Skills end to end with the scripted model on a real sandbox provisioner:
// an admin uploads a skill as a zip, confirms the install draft, and an
// agent with the skill in context.skills sees it listed in its system
// prompt, reads its SKILL.md with read_file (activation), and only then is
// offered the tool the skill depends on (web_fetch, not among the agent's
// own tools), which it calls. A remote source — a local HTTP server serving
// a repository archive, allow-listed by YUXI_SKILL_SOURCE_HOSTS — is listed
// and prepared into an install draft.

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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

func zipFiles(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(files[n]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSkillActivationOpensItsGatedTool(t *testing.T) {
	t.Parallel()
	// The page the gated tool fetches, and a repository archive with two skills.
	archive := zipFiles(t, map[string]string{
		"skills-repo-main/README.md":               "a repository of skills\n",
		"skills-repo-main/tapir/SKILL.md":          "---\nname: tapir-notes\ndescription: Notes about tapirs.\n---\n# Tapir notes\n",
		"skills-repo-main/tapir/notes.md":          "Tapirs are odd-toed ungulates.\n",
		"skills-repo-main/capybara/SKILL.md":       "---\nname: capybara-facts\ndescription: Capybara facts.\n---\n# Capybara\n",
		"skills-repo-main/capybara/scripts/run.sh": "echo capybara\n",
	})
	var mu sync.Mutex
	fetched := 0
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/okapi.txt":
			mu.Lock()
			fetched++
			mu.Unlock()
			_, _ = w.Write([]byte("The okapi is the giraffe's closest living relative."))
		case "/repo.zip":
			w.Header().Set("Content-Type", "application/zip")
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(web.Close)
	host := strings.TrimPrefix(web.URL, "http://")

	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32", "YUXI_SKILL_SOURCE_HOSTS": web.URL},
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	admin := p.Admin

	// Upload (zip) → draft → confirm.
	skillMD := "---\nname: okapi-research\ndescription: Research okapis on the web.\ntool_dependencies: [web_fetch]\n---\n" +
		"# Okapi research\n\nFetch the page with web_fetch and quote it.\n"
	up := admin.PostFile("/api/skills/import/prepare", "okapi.zip", zipFiles(t, map[string]string{
		"okapi/SKILL.md": skillMD, "okapi/reference/sources.md": "- " + web.URL + "/okapi.txt\n"}))
	if up.Status != http.StatusOK {
		t.Fatalf("prepare: %d %s", up.Status, up.Body)
	}
	draft := up.JSON()["data"].(map[string]any)
	item := draft["items"].([]any)[0].(map[string]any)
	if item["slug"] != "okapi-research" || fmt.Sprint(item["tool_dependencies"]) != "[web_fetch]" {
		t.Fatalf("draft item: %v", item)
	}
	confirmed := admin.OK("POST", "/api/skills/install-drafts/"+draft["draft_id"].(string)+"/confirm",
		map[string]any{"share_config": map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "global"}}})
	if confirmed["summary"].(map[string]any)["success"] != float64(1) {
		t.Fatalf("confirm: %v", confirmed)
	}
	tree := admin.OK("GET", "/api/system/skills/okapi-research/tree", nil)
	if !strings.Contains(fmt.Sprint(tree["data"]), "sources.md") {
		t.Errorf("tree: %v", tree)
	}

	// The agent: the skill in context.skills, web_fetch not among its tools.
	admin.OK("POST", "/api/agent", map[string]any{"name": "Okapi helper", "slug": "okapi-helper",
		"config_json": map[string]any{"context": map[string]any{"skills": []string{"okapi-research"}, "tools": []string{}}}})
	const query = "Tell me about okapis, using your skill."
	const skillPath = "/home/gem/skills/okapi-research/SKILL.md"
	var seen [][]string // the tool names of each model request, in order
	var systems []string
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if req.LastUserMessage() != query {
			return llmtest.Text("?")
		}
		names := []string{}
		for _, tl := range req.Tools {
			names = append(names, tl.Name)
		}
		mu.Lock()
		seen = append(seen, names)
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			systems = append(systems, req.Messages[0].Content)
		}
		mu.Unlock()
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role != "tool":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_read", Name: "read_file", Arguments: `{"file_path":"` + skillPath + `"}`})
		case last.ToolCallID == "call_read":
			return llmtest.Calls(llmtest.ToolCall{ID: "call_fetch", Name: "web_fetch", Arguments: `{"url":"` + web.URL + `/okapi.txt"}`})
		}
		return llmtest.Text("From the web: " + last.Content)
	})
	th := admin.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "okapi-helper", "title": "okapi"})["id"].(string)
	runID := admin.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "okapi-helper", "thread_id": th,
		"tool_approval_mode": "always_trust"})["run_id"].(string)
	r := testkit.Render(admin.Collect(runID, 60*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	if texts := strings.Join(r.Texts(), ""); !strings.Contains(texts, "giraffe's closest living relative") {
		t.Fatalf("answer: %q", texts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("model requests: %d (%v)", len(seen), seen)
	}
	// Before activation the skill's tool is hidden; after reading SKILL.md it is offered.
	if slices.Contains(seen[0], "web_fetch") || !slices.Contains(seen[0], "read_file") {
		t.Errorf("tools before activation: %v", seen[0])
	}
	if !slices.Contains(seen[1], "web_fetch") || !slices.Contains(seen[2], "web_fetch") {
		t.Errorf("tools after activation: %v then %v", seen[1], seen[2])
	}
	if !strings.Contains(systems[0], "okapi-research: Research okapis on the web. — "+skillPath) || strings.Contains(systems[0], "okapi-research (active)") {
		t.Errorf("system prompt before activation: %q", systems[0])
	}
	if !strings.Contains(systems[1], "okapi-research (active)") {
		t.Errorf("system prompt after activation: %q", systems[1])
	}
	reqs := modelRequestsFor(t, p, query)
	msgs := testkit.ToolMessages(reqs[len(reqs)-1])
	if !strings.Contains(msgs["call_read"], "Fetch the page with web_fetch") {
		t.Errorf("SKILL.md as the model read it: %q", msgs["call_read"])
	}
	if fetched != 1 {
		t.Errorf("the page was fetched %d times", fetched)
	}

	// Remote source: listed, then prepared into a draft, from the allow-listed host only.
	list := admin.OK("POST", "/api/skills/remote/list", map[string]any{"source": web.URL + "/repo.zip"})
	var slugs []string
	for _, s := range list["data"].([]any) {
		slugs = append(slugs, s.(map[string]any)["slug"].(string))
	}
	if fmt.Sprint(slugs) != "[capybara-facts tapir-notes]" {
		t.Errorf("remote list: %v", list)
	}
	prep := admin.OK("POST", "/api/skills/remote/prepare", map[string]any{"source": web.URL + "/repo.zip", "skills": []string{"tapir-notes", "missing-one"}})
	d := prep["data"].(map[string]any)
	if d["source_type"] != "remote" || len(d["items"].([]any)) != 2 {
		t.Fatalf("remote draft: %v", d)
	}
	byslug := map[string]map[string]any{}
	for _, it := range d["items"].([]any) {
		byslug[it.(map[string]any)["slug"].(string)] = it.(map[string]any)
	}
	if byslug["tapir-notes"]["success"] != true || byslug["missing-one"]["success"] == true {
		t.Errorf("remote draft items: %v", byslug)
	}
	rc := admin.OK("POST", "/api/skills/install-drafts/"+d["draft_id"].(string)+"/confirm", map[string]any{"slugs": []string{"tapir-notes"}})
	if rc["summary"].(map[string]any)["success"] != float64(1) {
		t.Fatalf("confirm remote: %v", rc)
	}
	if f := admin.OK("GET", "/api/system/skills/tapir-notes/file?path=notes.md", nil)["data"].(map[string]any); f["content"] != "Tapirs are odd-toed ungulates.\n" {
		t.Errorf("remote skill's file: %v", f)
	}
	// Another host (not allow-listed) is refused before any fetch; so is the
	// allow-listed host over a path that is not an archive.
	if r := admin.Do("POST", "/api/skills/remote/list", map[string]any{"source": "https://127.0.0.2:" + strings.Split(host, ":")[1] + "/repo.zip"}); r.Status != 403 || r.Code() != "remote_source_forbidden" {
		t.Errorf("off the allow-list: %d %s", r.Status, r.Body)
	}
	if r := admin.Do("POST", "/api/skills/remote/list", map[string]any{"source": web.URL + "/nothing.zip"}); r.Status != 422 || r.Code() != "remote_source_unreachable" {
		t.Errorf("a missing archive: %d %s", r.Status, r.Body)
	}
}
