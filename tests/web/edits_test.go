package web

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/mcpfixture"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestWebEditsInChromium drives the edit and operate screens of issue 15's
// leftovers (browser/edits.mjs): a Dify KB's settings edited (the key shown
// as ******** and kept), agent evaluation suite items with regex, JSON-schema
// and judge checks, a running dataset generation cancelled, the graph's
// labels listed and filtered on, an MCP tool's test call with a JSON
// arguments editor, and a user's role and department, a department's name
// and a model provider's details edited in administration.
//
// The dataset generation's model answers are held until the script, having
// seen the cancel requested, releases them (POST /release/generation).
func TestWebEditsInChromium(t *testing.T) {
	root, chromium := browserTools(t, true)

	g := &gates{ch: map[string]chan struct{}{}}
	ctrl := httptest.NewServer(g)
	t.Cleanup(ctrl.Close)
	fx := mcpfixture.Start(t)
	dify := fakeDify(t)
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartFirstRun(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"}, local.WithWeb(filepath.Join(root, "web", "dist")),
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		var first llmtest.Message
		if len(req.Messages) > 0 {
			first = req.Messages[0]
		}
		switch q := req.LastUserMessage(); {
		case strings.Contains(q, `{"query": "问题"`):
			<-g.get("generation") // held until the cancel is seen in the UI
			return llmtest.Text(`{"query":"How many vacation days per year?","answer":"25 days"}`)
		case strings.Contains(q, "You are a strict evaluator"):
			return llmtest.Text(`{"score": 0.9, "reasoning": "short and polite"}`)
		case first.Role == "system" && strings.Contains(first.Content, `{"entities":[`):
			return llmtest.Text(`{"entities":[{"name":"Employees","type":"group","description":"the staff"},` +
				`{"name":"Paid vacation","type":"benefit","description":"25 days a year"},{"name":"Trains","type":"transport","description":"second class"}],` +
				`"relations":[{"source":"Employees","target":"Paid vacation","type":"receive","description":"25 days per year"},` +
				`{"source":"Employees","target":"Trains","type":"book","description":"in second class"}]}`)
		}
		return llmtest.Text("OK.")
	})
	t.Cleanup(func() { g.release("generation") }) // before the platform stops

	shots := filepath.Join(root, "tests", "web", "screenshots-edits")
	_ = os.RemoveAll(shots)
	runScript(t, root, chromium, "edits.mjs", shots, "BASE_URL="+p.URL, "CONTROL_URL="+ctrl.URL, "MCP_URL="+fx.URL, "DIFY_URL="+dify.URL+"/v1")
}
