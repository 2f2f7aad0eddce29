package e2e

// A tool result over the large-result threshold is offloaded to the
// thread's outputs/large_tool_results/ and the model gets a preview and
// the path (which it reads back with read_file); the thread here has a
// caller-chosen id the provisioner's id pattern refuses ("ops chat:42"), so
// this also proves such threads reach their files through the tools and
// the file routes (they are mapped to a stable file-thread id).

import (
	"net/url"
	"os"
	"strconv"
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

func TestLargeToolResultIsOffloadedToTheThreadsFiles(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	const query = "count to 30000"
	const thread = "ops chat:42"
	const offloaded = sandboxtool.LargeResultsDir + "/call_big.txt"
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
		case 0: // about 169 KB of output: over 20000 tokens
			return llmtest.Calls(llmtest.ToolCall{ID: "call_big", Name: "execute", Arguments: `{"command":"seq 1 30000"}`})
		case 1:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_read", Name: "read_file", Arguments: `{"file_path":"` + offloaded + `","offset":29998,"limit":5}`})
		}
		return llmtest.Text("tail: " + strings.TrimSpace(req.Messages[len(req.Messages)-1].Content))
	})
	c := p.Admin
	out := c.OK("POST", callPath, map[string]any{"agent_slug": "default-chatbot", "messages": userMsg(query), "thread_id": thread,
		"tool_approval_mode": "always_trust"})
	if out["status"] != "completed" || !strings.Contains(out["output"].(string), "29999\t29999\n 30000\t30000") {
		t.Fatalf("agent-call: %v", out)
	}
	reqs := modelRequestsFor(t, p, query)
	big := testkit.ToolMessages(reqs[len(reqs)-1])["call_big"]
	if !strings.HasPrefix(big, "Tool result too large") || !strings.Contains(big, "saved at "+offloaded) ||
		!strings.Contains(big, "1\n2\n3\n") || len(big) > 2000 {
		t.Fatalf("the model got %d bytes: %q", len(big), big[:min(len(big), 600)])
	}
	var seq strings.Builder
	for i := 1; i <= 30000; i++ {
		seq.WriteString(strconv.Itoa(i) + "\n")
	}
	want := seq.String() + "[exit code 0]"
	// The whole result is in the thread's files, under the mapped file-thread id…
	scope := sandbox.ThreadScope(uidOf(t, p), thread)
	if scope.FileThread == thread || !strings.HasPrefix(scope.FileThread, "t-") {
		t.Fatalf("file thread of %q: %q", thread, scope.FileThread)
	}
	if got, err := os.ReadFile(sb.HostPath(scope, offloaded)); err != nil || string(got) != want {
		t.Fatalf("offloaded file: %d bytes, %v", len(got), err)
	}
	// …and the file routes reach it by the thread's own id.
	esc := url.PathEscape(thread)
	dl := c.Do("GET", "/api/chat/thread/"+esc+"/artifacts/outputs/large_tool_results/call_big.txt", nil)
	if dl.Status != 200 || string(dl.Body) != want {
		t.Fatalf("artifact route: %d %.200s", dl.Status, dl.Body)
	}
	tree := c.OK("GET", "/api/viewer/filesystem/tree?thread_id="+url.QueryEscape(thread)+"&path="+url.QueryEscape(sandboxtool.LargeResultsDir), nil)
	if es := tree["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["path"] != offloaded {
		t.Fatalf("viewer tree: %v", tree)
	}
}
