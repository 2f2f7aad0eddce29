package e2e

// Issue 8's done-when journey on a real provisioner (bwrap) with the
// scripted model: the agent writes a Python script to outputs/, runs it with
// execute after the user approves each call, presents the script's result
// with present_artifacts; the artifact is in the thread's state, downloads
// through the artifacts route and shows in the viewer tree.

import (
	"encoding/json"
	"net/url"
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

func TestAgentPresentsAScriptsResultAsAnArtifact(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	const query = "tabulate the squares of 1..5 as a csv file for me"
	const script = "with open('outputs/squares.csv', 'w') as f:\n    f.write('n,square\\n')\n    for n in range(1, 6):\n        f.write(f'{n},{n*n}\\n')\nprint('wrote 5 rows')\n"
	const csv = "n,square\n1,1\n2,4\n3,9\n4,16\n5,25\n"
	writeArgs, _ := json.Marshal(map[string]string{"file_path": "outputs/squares.py", "content": script})
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
				Arguments: string(writeArgs)})
		case 1:
			// Relative to /home/gem/user-data, where execute runs.
			return llmtest.Calls(llmtest.ToolCall{ID: "call_x", Name: "execute", Arguments: `{"command":"python3 outputs/squares.py"}`})
		case 2:
			return llmtest.Calls(llmtest.ToolCall{ID: "call_p", Name: "present_artifacts",
				Arguments: `{"filepaths":["/home/gem/user-data/outputs/squares.csv"]}`})
		}
		return llmtest.Text("done: " + strings.TrimSpace(req.Messages[len(req.Messages)-1].Content))
	})
	c := p.Admin
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "squares"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th})["run_id"].(string)
	for i, want := range []string{"write_file", "execute"} {
		r := testkit.Render(c.Collect(runID, 60*time.Second))
		chunk, _ := r.Interrupt["chunk"].(map[string]any)
		appr, _ := chunk["approval"].(map[string]any)
		reqs, _ := appr["action_requests"].([]any)
		if r.EndStatus != "interrupted" || len(reqs) != 1 || reqs[0].(map[string]any)["name"] != want {
			t.Fatalf("run %d (%s): %+v", i, runID, r)
		}
		runID = c.OK("POST", "/api/agent/runs", map[string]any{"agent_slug": "default-chatbot", "thread_id": th, "created_by_run_id": runID,
			"resume": map[string]any{"decisions": []map[string]any{{"type": "approve"}}}})["run_id"].(string)
	}
	r := testkit.Render(c.Collect(runID, 60*time.Second))
	const artifact = sandbox.OutputsDir + "/squares.csv"
	if r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), "done: Presented to the user: "+artifact) {
		t.Fatalf("final run %s: %+v %q", runID, r, r.Texts())
	}
	reqs := modelRequestsFor(t, p, query)
	msgs := testkit.ToolMessages(reqs[len(reqs)-1])
	if msgs["call_x"] != "wrote 5 rows\n[exit code 0]" {
		t.Fatalf("execute's result: %q", msgs["call_x"])
	}

	// The thread's state lists the artifact, with the run and call that presented it.
	st := c.OK("GET", "/api/chat/thread/"+th+"/state", nil)["agent_state"].(map[string]any)
	arts, _ := st["artifacts"].([]any)
	items, _ := st["artifact_items"].([]any)
	if len(arts) != 1 || arts[0] != artifact || len(items) != 1 || items[0].(map[string]any)["tool_call_id"] != "call_p" ||
		items[0].(map[string]any)["run_id"] != runID {
		t.Fatalf("state artifacts: %v", st)
	}
	// It downloads through the artifacts route…
	dl := c.Do("GET", "/api/chat/thread/"+th+"/artifacts/outputs/squares.csv", nil)
	if dl.Status != 200 || string(dl.Body) != csv || !strings.HasPrefix(dl.Header.Get("Content-Type"), "text/") {
		t.Fatalf("download: %d %v %q", dl.Status, dl.Header, dl.Body)
	}
	// …and shows in the viewer tree, next to the script.
	tree := c.OK("GET", "/api/viewer/filesystem/tree?thread_id="+th+"&path="+url.QueryEscape(sandbox.OutputsDir), nil)
	var paths []string
	for _, e := range tree["entries"].([]any) {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	if strings.Join(paths, ",") != artifact+","+sandbox.OutputsDir+"/squares.py" {
		t.Fatalf("viewer tree of outputs: %v", paths)
	}
	// Another user sees none of it.
	bob := c.CreateUser("bob-journey", "user", nil)
	if r := bob.Do("GET", "/api/chat/thread/"+th+"/artifacts/outputs/squares.csv", nil); r.Status != 404 {
		t.Fatalf("bob downloads alice's artifact: %d %s", r.Status, r.Body)
	}
}
