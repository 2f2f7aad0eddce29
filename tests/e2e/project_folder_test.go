package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// A project owns a managed working folder on the sandbox provisioner's
// volume (issue 9), made through the provisioner's API when the project is
// created: the sandboxes of the project's threads (bwrap, real) see it at
// /home/gem/user-data/workspace/projects/<id> — what one thread writes
// there another reads — another user's sandboxes do not; deleting the
// project removes the folder and keeps its threads; linked projects are
// refused with a clear code.
func TestProjectOwnsAFolderOnTheProvisionerVolume(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	ctx := context.Background()
	alice, bob := p.Admin.NewUser("alice"), p.Admin.NewUser("bob")

	pr := alice.OK("POST", "/api/projects", map[string]any{"name": "Research"})
	id := pr["id"].(string)
	dir := sandbox.ProjectDir(id)
	if pr["workdir_path"] != "projects/"+id || pr["sandbox_path"] != dir || dir != "/home/gem/user-data/workspace/projects/"+id {
		t.Fatalf("project: %v", pr)
	}
	if e, err := sb.Client.Stat(ctx, sandbox.Scope{UID: "alice"}, dir); err != nil || !e.IsDir {
		t.Fatalf("the project's folder on the volume: %+v %v", e, err)
	}
	if r := alice.Do("POST", "/api/projects", map[string]any{"name": "Host", "directory_mode": "linked", "workdir_path": "/srv"}); r.Status != http.StatusUnprocessableEntity || r.Code() != "linked_project_unsupported" {
		t.Fatalf("linked project: %d %s", r.Status, r.Body)
	}

	// Two threads of the project share the folder through their sandboxes.
	t1 := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "project_id": id})["id"].(string)
	t2 := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "project_id": id})["id"].(string)
	exec := func(uid, thread, cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := sb.Client.Exec(ctx, sandbox.ThreadScope(uid, thread), nil, sandbox.ExecRequest{Command: cmd})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return res
	}
	if res := exec("alice", t1, "echo findings > "+dir+"/notes.md && ls -d "+dir); res.ExitCode != 0 {
		t.Fatalf("thread 1 writes into the project folder: %+v", res)
	}
	if res := exec("alice", t2, "cat "+dir+"/notes.md"); res.ExitCode != 0 || strings.TrimSpace(res.Output) != "findings" {
		t.Fatalf("thread 2 reads the project folder: %+v", res)
	}
	bobThread := bob.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot"})["id"].(string)
	if res := exec("bob", bobThread, "cat "+dir+"/notes.md"); res.ExitCode == 0 || strings.Contains(res.Output, "findings") {
		t.Fatalf("another user's sandbox reads the folder: %+v", res)
	}

	// Only the owner deletes it; the delete removes the folder, not the threads.
	if r := bob.Do("DELETE", "/api/projects/"+id, nil); r.Status != http.StatusNotFound || r.Code() != "project_not_found" {
		t.Fatalf("bob deletes alice's project: %d %s", r.Status, r.Body)
	}
	alice.OK("DELETE", "/api/projects/"+id, nil)
	if _, err := sb.Client.Stat(ctx, sandbox.Scope{UID: "alice"}, dir); !sandbox.IsCode(err, "not_found") {
		t.Fatalf("deleted project's folder: %v", err)
	}
	if res := exec("alice", t1, "test -e "+dir); res.ExitCode == 0 {
		t.Fatalf("the thread's sandbox still sees the deleted folder")
	}
	kept := 0
	for _, raw := range alice.OK("GET", "/api/projects/history-candidates", nil)["items"].([]any) {
		if c := raw.(map[string]any); (c["thread_id"] == t1 || c["thread_id"] == t2) && c["project_id"] == nil {
			kept++
		}
	}
	if kept != 2 {
		t.Fatalf("%d of the project's 2 threads kept, outside any project", kept)
	}
	if r := alice.Do("DELETE", "/api/projects/"+id, nil); r.Status != http.StatusNotFound {
		t.Fatalf("second delete: %d %s", r.Status, r.Body)
	}
}
