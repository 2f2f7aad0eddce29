package e2e

import (
	"net/http"
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

// TestConfirmParsesAttachments: an attachment confirmed without a
// …/tmp/parse of its own is parsed at confirm, as the original leaves it:
// the Markdown is at uploads/attachments/<stem>.md, the entry points there
// (status parsed) and the agent reads it with read_file. Plain text stays
// as uploaded (readable as it is); a file the parser refuses stays an
// upload, and the confirm still succeeds.
func TestConfirmParsesAttachments(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	owner := p.Admin
	th := owner.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "auto-parse"})["id"].(string)
	upload := func(name, body string) string {
		up := owner.PostFile("/api/chat/attachments/tmp", name, []byte(body))
		if up.Status != http.StatusOK {
			t.Fatalf("tmp upload %s: %d %s", name, up.Status, up.Body)
		}
		return up.JSON()["object_name"].(string)
	}
	objs := []string{
		upload("report.html", "<html><body><h1>Report</h1><p>The okapi count is 17.</p></body></html>"),
		upload("notes.txt", "plain notes"),
		upload("broken.docx", "this is not a zip"),
	}
	var items []map[string]any
	for _, o := range objs {
		items = append(items, map[string]any{"object_name": o})
	}
	atts := owner.OK("POST", "/api/chat/thread/"+th+"/attachments/confirm", map[string]any{"attachments": items})["attachments"].([]any)
	if len(atts) != 3 {
		t.Fatalf("confirmed: %v", atts)
	}
	want := []struct{ path, original, status string }{
		{sandbox.UploadsDir + "/attachments/report.md", sandbox.UploadsDir + "/report.html", "parsed"},
		{sandbox.UploadsDir + "/notes.txt", sandbox.UploadsDir + "/notes.txt", "uploaded"},
		{sandbox.UploadsDir + "/broken.docx", sandbox.UploadsDir + "/broken.docx", "uploaded"},
	}
	var fileID string
	for i, w := range want {
		a := atts[i].(map[string]any)
		if a["path"] != w.path || a["original_path"] != w.original || a["status"] != w.status {
			t.Errorf("attachment %d: %v, want %+v", i, a, w)
		}
		if i == 0 {
			fileID = a["file_id"].(string)
		}
	}
	scope := sandbox.Scope{UID: uidOf(t, p), FileThread: th}
	if md, err := os.ReadFile(sb.HostPath(scope, want[0].path)); err != nil || !strings.Contains(string(md), "okapi count is 17") {
		t.Fatalf("parsed Markdown on the volume: %q %v", md, err)
	}

	runReadsAttachment(t, p, owner, th, fileID, want[0].path, "how many okapis?", "okapi count is 17")
}

// runReadsAttachment scripts the model with readsAttachment, starts a run
// of the default chatbot in thread th bound to the attachment fileID
// (confirmed at path), and fails t unless the run completes with want in
// its text.
func runReadsAttachment(t *testing.T, p *testkit.Local, user *testkit.Client, th, fileID, path, query, want string) {
	t.Helper()
	p.LLM.Handle(readsAttachment(query, path))
	in := user.OK("POST", "/api/agent/runs", map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": th,
		"meta": map[string]any{"attachment_file_ids": []string{fileID}}})
	r := testkit.Render(user.Collect(in["run_id"].(string), 60*time.Second))
	if r.EndStatus != "completed" || !strings.Contains(strings.Join(r.Texts(), ""), want) {
		t.Fatalf("run: %+v %q", r, r.Texts())
	}
}

// readsAttachment is a scripted model that, asked query, reads the
// attachment at path with read_file when the prompt names it and answers
// "read: <what it read>".
func readsAttachment(query, path string) func(req llmtest.ChatRequest) llmtest.Reply {
	return func(req llmtest.ChatRequest) llmtest.Reply {
		if !strings.HasPrefix(req.LastUserMessage(), query) {
			return llmtest.Text("?")
		}
		for _, m := range req.Messages {
			if m.Role == "tool" {
				return llmtest.Text("read: " + strings.TrimSpace(m.Content))
			}
		}
		if !strings.Contains(req.LastUserMessage(), path) {
			return llmtest.Text("no attachment path in the prompt")
		}
		return llmtest.Calls(llmtest.ToolCall{ID: "call_read", Name: "read_file", Arguments: `{"file_path":"` + path + `"}`})
	}
}
