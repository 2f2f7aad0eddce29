package web

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/mcpeverything"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

var kbIDInResult = regexp.MustCompile(`"kb_id":\s*"([^"]+)"`)

// extrasScript answers the extras journey: a knowledge question goes
// list_kbs → query_kb → an answer with math; a report request goes
// write_file → present_artifacts → a short answer; the graph extractor and
// the mind map get fixed JSON.
func extrasScript(req llmtest.ChatRequest) llmtest.Reply {
	q := req.LastUserMessage()
	var last, first llmtest.Message
	if n := len(req.Messages); n > 0 {
		first, last = req.Messages[0], req.Messages[n-1]
	}
	switch {
	case first.Role == "system" && strings.Contains(first.Content, "mind map"):
		return llmtest.Text(`{"content":"Handbook","children":[{"content":"Policies","children":[{"content":"handbook.md"}]}]}`)
	case first.Role == "system" && strings.Contains(first.Content, `{"entities":[`):
		return llmtest.Text(`{"entities":[{"name":"Employees","type":"group","description":"the staff"},` +
			`{"name":"Paid vacation","type":"benefit","description":"25 days a year"},{"name":"Trains","type":"transport","description":"second class"}],` +
			`"relations":[{"source":"Employees","target":"Paid vacation","type":"receive","description":"25 days per year"},` +
			`{"source":"Employees","target":"Trains","type":"book","description":"in second class"}]}`)
	case strings.Contains(q, "vacation") && last.Role == "user":
		return llmtest.Calls(llmtest.ToolCall{ID: "kbs1", Name: "list_kbs", Arguments: `{}`})
	case strings.Contains(q, "vacation") && last.ToolCallID == "kbs1":
		m := kbIDInResult.FindStringSubmatch(last.Content)
		if m == nil {
			return llmtest.Text("no knowledge base: " + last.Content)
		}
		return llmtest.Calls(llmtest.ToolCall{ID: "q1", Name: "query_kb", Arguments: `{"kb_id":"` + m[1] + `","query_text":"paid vacation days"}`})
	case strings.Contains(q, "vacation"):
		return llmtest.Text("Employees get 25 days of paid vacation. ", "In days per month: $25/12 \\approx 2.08$, and ",
			"$$\\sum_{m=1}^{12} \\frac{25}{12} = 25$$")
	case strings.Contains(q, "report") && last.Role == "user":
		return llmtest.Calls(llmtest.ToolCall{ID: "w1", Name: "write_file",
			Arguments: `{"file_path":"/home/gem/user-data/outputs/report.md","content":"# Quarterly report\n\nThe okapi count rose to 12.\n"}`})
	case strings.Contains(q, "report") && last.ToolCallID == "w1":
		return llmtest.Calls(llmtest.ToolCall{ID: "p1", Name: "present_artifacts", Arguments: `{"filepaths":["/home/gem/user-data/outputs/report.md"]}`})
	case strings.Contains(q, "report"):
		return llmtest.Text("The report is ready.")
	}
	return llmtest.Text("OK.")
}

// TestWebExtrasInChromium drives the screens added after the first journey
// (browser/extras.mjs): artifact cards, citations and math in chat, the
// knowledge-base extras (folders, preview/edit, re-index, query test,
// sharing), administration of MCP servers, skills and the dashboard, the
// agent form's pickers, and the evaluation and graph screens.
func TestWebExtrasInChromium(t *testing.T) {
	root, chromium := browserTools(t, true)

	mcp := mcpeverything.StartT(t)
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartFirstRun(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"}, local.WithWeb(filepath.Join(root, "web", "dist")),
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	p.LLM.Handle(extrasScript)

	shots := filepath.Join(root, "tests", "web", "screenshots-extras")
	_ = os.RemoveAll(shots)
	dir := t.TempDir()
	md := filepath.Join(dir, "handbook.md")
	skill := filepath.Join(dir, "SKILL.md")
	for path, body := range map[string]string{
		md:    "# Handbook\n\nEmployees get 25 days of paid vacation per year.\n\n## Travel\n\nBook trains in second class.\n",
		skill: "---\nname: okapi-facts\ndescription: Facts about okapis for reports.\n---\n\n# Okapi facts\n\nOkapis are related to giraffes.\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runScript(t, root, chromium, "extras.mjs", shots, "BASE_URL="+p.URL, "MD_FILE="+md, "SKILL_FILE="+skill, "MCP_URL="+mcp.URL)
}
