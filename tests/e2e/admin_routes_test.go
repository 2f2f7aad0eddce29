package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The task centre, the dashboard, the system logs and OCR health over HTTP
// (issue 9): the routes, their roles and their answers' shapes.
func TestTasksDashboardAndSystemRoutes(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	super := p.Admin
	admin := super.CreateUser("ops-admin", "admin", nil)
	user := super.CreateUser("ops-user", "user", nil)

	// An ingestion batch is a task of its KB's managers.
	kbID := admin.NewKnowledgeBase("tasks KB", "batches", nil)
	items := []string{admin.UploadKB(kbID, "a.md", []byte("# A\n\nalpha.\n")), admin.UploadKB(kbID, "b.md", []byte("# B\n\nbeta.\n"))}
	added := admin.OK("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": map[string]any{}})
	taskID, _ := added["task_id"].(string)
	if !strings.HasPrefix(taskID, "ingest_") {
		t.Fatalf("documents answer: %v", added)
	}
	deadline := time.Now().Add(90 * time.Second)
	var task map[string]any
	for {
		task = admin.OK("GET", "/api/tasks/"+taskID, nil)["task"].(map[string]any)
		if task["status"] == "success" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // ingestion runs on events the test cannot wait on
	}
	if task["status"] != "success" || task["progress"] != float64(100) || task["type"] != "knowledge_ingest" || task["kb_id"] != kbID {
		t.Fatalf("task = %v", task)
	}
	list := admin.OK("GET", "/api/tasks?status=success", nil)
	if ts := list["tasks"].([]any); len(ts) != 1 || ts[0].(map[string]any)["id"] != taskID {
		t.Fatalf("list = %v", list)
	}
	if r := admin.Do("POST", "/api/tasks/"+taskID+"/cancel", nil); r.Status != 400 || r.Code() != "task_not_cancellable" {
		t.Fatalf("cancel a finished task: %d %s", r.Status, r.Body)
	}
	// A plain user's task list holds only their own agent-suite runs: none
	// of the knowledge tasks, which stay admin-only.
	if ts := user.OK("GET", "/api/tasks", nil)["tasks"].([]any); len(ts) != 0 {
		t.Fatalf("user lists tasks: %v", ts)
	}
	if r := user.Do("GET", "/api/tasks/"+taskID, nil); r.Status != 404 || r.Code() != "task_not_found" {
		t.Fatalf("user reads a knowledge task: %d %s", r.Status, r.Body)
	}
	if r := user.Do("POST", "/api/tasks/"+taskID+"/cancel", nil); r.Status != 403 {
		t.Fatalf("user cancels a task: %d %s", r.Status, r.Body)
	}
	admin.OK("DELETE", "/api/tasks/"+taskID, nil)
	if r := admin.Do("GET", "/api/tasks/"+taskID, nil); r.Status != 404 || r.Code() != "task_not_found" {
		t.Fatalf("deleted task: %d %s", r.Status, r.Body)
	}

	// Some chat for the dashboard to count.
	th := user.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "dash"})["id"].(string)
	p.LLM.Enqueue(llmtest.Text("an answer"))
	in := user.Submit(th, "a question", nil)
	if r := testkit.Render(user.Collect(in["run_id"].(string), 30*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("run: %+v", r)
	}
	stats := super.OK("GET", "/api/dashboard/stats", nil)
	if stats["total_messages"].(float64) < 2 || stats["total_conversations"].(float64) < 1 || stats["total_users"].(float64) < 3 {
		t.Fatalf("stats = %v", stats)
	}
	for _, path := range []string{"/api/dashboard/stats/users", "/api/dashboard/stats/tools", "/api/dashboard/stats/agents",
		"/api/dashboard/stats/calls/timeseries?type=tokens&time_range=14hours", "/api/dashboard/stats/knowledge", "/api/dashboard/feedbacks",
		"/api/dashboard/conversations/" + th} {
		if r := super.Do("GET", path, nil); r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if r := admin.Do("GET", path, nil); r.Status != http.StatusForbidden || r.Code() != "superadmin_required" {
			t.Fatalf("admin GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	r := super.Do("GET", "/api/dashboard/conversations", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), th) {
		t.Fatalf("conversations: %d %s", r.Status, r.Body)
	}
	if r := super.Do("GET", "/api/dashboard/stats/calls/timeseries?type=bogus", nil); r.Status != 422 || r.Code() != "invalid_type" {
		t.Fatalf("bad type: %d %s", r.Status, r.Body)
	}
	if r := super.Do("GET", "/api/dashboard/conversations/nope", nil); r.Status != 404 || r.Code() != "conversation_not_found" {
		t.Fatalf("missing conversation: %d %s", r.Status, r.Body)
	}

	// System logs: the superadmin's; OCR health: every user's.
	logs := super.OK("GET", "/api/system/logs", nil)
	if logs["scope"] != "api" || logs["message"] != "success" {
		t.Fatalf("logs = %v", logs)
	}
	if r := admin.Do("GET", "/api/system/logs", nil); r.Status != 403 {
		t.Fatalf("admin reads logs: %d %s", r.Status, r.Body)
	}
	h := user.OK("GET", "/api/system/ocr/health", nil)["health"].(map[string]any)
	if st := h["mineru_ocr"].(map[string]any)["status"]; st != "unavailable" {
		t.Fatalf("ocr health = %v", h)
	}
}
