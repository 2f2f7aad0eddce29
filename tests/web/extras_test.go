package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
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

// fakeDify is Dify's dataset retrieve API for dataset "ds-1" and key
// "dify-secret-key" (as tests/e2e's): a wrong key or path is refused, a
// query answers one segment that quotes it.
func fakeDify(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/datasets/ds-1/retrieve" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer dify-secret-key" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","message":"Access token is invalid"}`))
			return
		}
		var body struct {
			Query string `json:"query"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Query == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = fmt.Fprintf(w, `{"query":{"content":%q},"records":[{"segment":{"id":"seg-1","position":1,"document_id":"doc-1",`+
			`"content":%q,"document":{"id":"doc-1","name":"manual.pdf"}},"score":0.91}]}`, body.Query, "Dify says: "+body.Query+" is in the manual.")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWebExtrasInChromium drives the screens added after the first journey
// (browser/extras.mjs): artifact cards, citations and math in chat, the
// knowledge-base extras (folders, preview/edit, re-index, query test,
// sharing), administration of MCP servers, skills and the dashboard, the
// agent form's pickers, the evaluation screens (incl. a generated dataset
// that fails and is resumed), the graph screens, a Dify connector KB created
// from the create_params of GET /api/knowledge/types, and agent evaluation
// suites.
func TestWebExtrasInChromium(t *testing.T) {
	root, chromium := browserTools(t, true)

	mcp := mcpeverything.StartT(t)
	dify := fakeDify(t)
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartFirstRun(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"}, local.WithWeb(filepath.Join(root, "web", "dist")),
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	// Benchmark generation: the first question the model is asked for is
	// unusable (the generation fails), later ones are good (resume works).
	var generated atomic.Int64
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if strings.Contains(req.LastUserMessage(), `{"query": "问题"`) {
			if generated.Add(1) == 1 {
				return llmtest.Text("I cannot write a question.")
			}
			return llmtest.Text(`{"query":"How many vacation days per year?","answer":"25 days"}`)
		}
		return extrasScript(req)
	})

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
	runScript(t, root, chromium, "extras.mjs", shots, "BASE_URL="+p.URL, "MD_FILE="+md, "SKILL_FILE="+skill, "MCP_URL="+mcp.URL, "DIFY_URL="+dify.URL+"/v1")
}
