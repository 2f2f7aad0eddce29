package e2e

// Attachments, the viewer and the workspace on a real sandbox provisioner
// (bwrap backend): a user uploads an HTML attachment, parses it to
// Markdown and confirms it into a thread; the parsed Markdown is in the
// thread's uploads on the provisioner's volume; a run bound to it with
// meta.attachment_file_ids tells the agent its sandbox path, and the
// scripted model reads it with read_file; the viewer tree lists it and
// the artifact route serves it; a second account is refused everywhere.

import (
	"archive/zip"
	"bytes"
	"net/http"
	"net/url"
	"os"
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

func TestAttachmentIsParsedConfirmedAndReadByTheAgent(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	owner := p.Admin
	th := owner.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "attachments"})["id"].(string)

	// Upload, parse, confirm.
	up := owner.PostFile("/api/chat/attachments/tmp", "budget.html", []byte("<html><body><h1>Budget</h1><p>The pangolin budget is 42 coins.</p></body></html>"))
	if up.Status != http.StatusOK {
		t.Fatalf("tmp upload: %d %s", up.Status, up.Body)
	}
	object := up.JSON()["object_name"].(string)
	parsed := owner.OK("POST", "/api/chat/attachments/tmp/parse", map[string]any{"object_name": object})
	pobj, _ := parsed["parsed_object_name"].(string)
	if pobj == "" || !strings.Contains(parsed["markdown_preview"].(string), "pangolin budget is 42") {
		t.Fatalf("parse: %v", parsed)
	}
	conf := owner.OK("POST", "/api/chat/thread/"+th+"/attachments/confirm", map[string]any{
		"attachments": []map[string]any{{"object_name": object, "parsed_object_name": pobj}}})
	atts := conf["attachments"].([]any)
	att := atts[0].(map[string]any)
	mdPath, fileID := att["path"].(string), att["file_id"].(string)
	if mdPath != sandbox.UploadsDir+"/attachments/budget.md" || att["original_path"] != sandbox.UploadsDir+"/budget.html" {
		t.Fatalf("confirmed attachment: %v", att)
	}
	scope := sandbox.Scope{UID: uidOf(t, p), FileThread: th}
	md, err := os.ReadFile(sb.HostPath(scope, mdPath))
	if err != nil || !strings.Contains(string(md), "pangolin budget is 42") {
		t.Fatalf("parsed Markdown on the volume: %q %v", md, err)
	}
	if l := owner.OK("GET", "/api/chat/thread/"+th+"/attachments", nil)["attachments"].([]any); len(l) != 1 {
		t.Fatalf("attachment list: %v", l)
	}

	// The agent is told the path and reads it with read_file.
	runReadsAttachment(t, p, owner, th, fileID, mdPath, "what is the pangolin budget?", "pangolin budget is 42")
	// An attachment is bound once: another request naming it is refused.
	if again := owner.Do("POST", "/api/agent/runs", map[string]any{"query": "again", "agent_slug": "default-chatbot", "thread_id": th,
		"meta": map[string]any{"attachment_file_ids": []string{fileID}}}); again.Status != 422 || again.Code() != "invalid_attachment_file_ids" {
		t.Fatalf("rebinding: %d %s", again.Status, again.Body)
	}

	// The viewer lists it, previews it, and the artifact route serves it safely.
	tree := owner.OK("GET", "/api/viewer/filesystem/tree?thread_id="+th+"&path="+url.QueryEscape(sandbox.UploadsDir+"/attachments"), nil)
	if es := tree["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["path"] != mdPath {
		t.Fatalf("viewer tree: %v", tree)
	}
	root := owner.OK("GET", "/api/viewer/filesystem/tree?thread_id="+th+"&path=/", nil)
	if es := root["entries"].([]any); len(es) == 0 || es[0].(map[string]any)["path"] != sandbox.UserDataDir+"/" {
		t.Fatalf("viewer root: %v", root)
	}
	pv := owner.OK("GET", "/api/viewer/filesystem/file?thread_id="+th+"&path="+url.QueryEscape(mdPath), nil)
	if pv["preview_type"] != "markdown" || !strings.Contains(pv["content"].(string), "pangolin") {
		t.Fatalf("viewer file: %v", pv)
	}
	html := owner.Do("GET", "/api/chat/thread/"+th+"/artifacts/uploads/budget.html", nil)
	if html.Status != 200 || strings.Contains(html.Header.Get("Content-Type"), "html") || html.Header.Get("X-Content-Type-Options") != "nosniff" ||
		!strings.HasPrefix(html.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("HTML artifact served as %d %v", html.Status, html.Header)
	}
	// A directory downloads as a zip holding the file.
	z := owner.Do("GET", "/api/viewer/filesystem/download?thread_id="+th+"&path="+url.QueryEscape(sandbox.UploadsDir), nil)
	zr, err := zip.NewReader(bytes.NewReader(z.Body), int64(len(z.Body)))
	if z.Status != 200 || err != nil {
		t.Fatalf("zip download: %d %v", z.Status, err)
	}
	names := []string{}
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "attachments/budget.md,budget.html" {
		t.Fatalf("zip entries %v", names)
	}
	// Saved to the workspace: visible in the workspace tree and as a mention before any thread.
	saved := owner.OK("POST", "/api/chat/thread/"+th+"/artifacts/save", map[string]any{"path": mdPath})
	if saved["path"] != sandbox.WorkspaceDir+"/saved_artifacts/budget.md" {
		t.Fatalf("save: %v", saved)
	}
	if m := owner.OK("GET", "/api/mention/search?query=budg", nil)["items"].([]any); len(m) != 1 || m[0].(map[string]any)["path"] != saved["path"] {
		t.Fatalf("mentions without a thread: %v", m)
	}
	if m := owner.OK("GET", "/api/mention/search?query=budg&thread_id="+th, nil)["items"].([]any); len(m) < 3 || m[0].(map[string]any)["source"] != "thread" {
		t.Fatalf("mentions in the thread: %v", m)
	}

	// A second account is refused everywhere, and sees nothing of the owner's.
	bob := owner.CreateUser("bob-files", "user", nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/viewer/filesystem/tree?thread_id=" + th + "&path=/home/gem/user-data/uploads"},
		{"GET", "/api/viewer/filesystem/file?thread_id=" + th + "&path=" + url.QueryEscape(mdPath)},
		{"GET", "/api/viewer/filesystem/download?thread_id=" + th + "&path=" + url.QueryEscape(mdPath)},
		{"DELETE", "/api/viewer/filesystem/file?thread_id=" + th + "&path=" + url.QueryEscape(mdPath)},
		{"GET", "/api/viewer/filesystem/search?thread_id=" + th + "&query=budget"},
		{"GET", "/api/chat/thread/" + th + "/artifacts/uploads/attachments/budget.md"},
		{"GET", "/api/chat/thread/" + th + "/attachments"},
		{"DELETE", "/api/chat/thread/" + th + "/attachments/" + fileID},
		{"GET", "/api/mention/search?query=budget&thread_id=" + th},
	} {
		if r := bob.Do(c.method, c.path, nil); r.Status != 404 || r.Code() != "thread_not_found" {
			t.Errorf("bob: %s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
	if r := bob.Do("POST", "/api/chat/attachments/tmp/parse", map[string]any{"object_name": object}); r.Status != 404 {
		t.Errorf("bob parses the owner's object: %d %s", r.Status, r.Body)
	}
	if r := bob.Do("GET", "/api/workspace/file?path=/saved_artifacts/budget.md", nil); r.Status != 404 || r.Code() != "file_not_found" {
		t.Errorf("bob reads the owner's workspace path: %d %s", r.Status, r.Body)
	}
	if r := bob.Do("GET", "/api/workspace/file?path="+url.QueryEscape("../../"+uidOf(t, p)+"/workspace/saved_artifacts/budget.md"), nil); r.Status != 403 {
		t.Errorf("bob escapes his workspace: %d %s", r.Status, r.Body)
	}
	if m := bob.OK("GET", "/api/mention/search?query=budget", nil)["items"].([]any); len(m) != 0 {
		t.Errorf("bob's mentions show the owner's files: %v", m)
	}
	if b, err := os.ReadFile(sb.HostPath(scope, mdPath)); err != nil || !bytes.Equal(b, md) {
		t.Fatalf("the owner's file after bob's attempts: %q %v", b, err)
	}
}

func TestUploadsRefuseUnsafeArchives(t *testing.T) {
	t.Parallel()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, nil, local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	mk := func(files map[string][]byte) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for name, data := range files {
			w, _ := zw.Create(name)
			_, _ = w.Write(data)
		}
		_ = zw.Close()
		return buf.Bytes()
	}
	bomb := mk(map[string][]byte{"zeros.bin": bytes.Repeat([]byte{0}, 64<<20)})
	for _, c := range []struct {
		name   string
		data   []byte
		status int
		code   string
	}{
		{"slip.zip", mk(map[string][]byte{"../../etc/cron.d/x": []byte("pwned")}), 422, "unsafe_archive_entry"},
		{"abs.zip", mk(map[string][]byte{"/etc/passwd": []byte("pwned")}), 422, "unsafe_archive_entry"},
		{"bomb.zip", bomb, 422, "archive_bomb"},
		{"huge.bin", bytes.Repeat([]byte("x"), 50<<20+1), 413, "file_too_large"},
	} {
		for _, route := range []string{"/api/chat/attachments/tmp", "/api/workspace/upload"} {
			r := p.Admin.PostFile(route, c.name, c.data)
			if r.Status != c.status || r.Code() != c.code {
				t.Errorf("%s to %s: %d %s, want %d %s", c.name, route, r.Status, r.Body, c.status, c.code)
			}
		}
	}
	if r := p.Admin.PostFile("/api/chat/attachments/tmp", "fine.zip", mk(map[string][]byte{"docs/a.txt": []byte("hello")})); r.Status != 200 {
		t.Errorf("a safe zip: %d %s", r.Status, r.Body)
	}
	if es := p.Admin.OK("GET", "/api/workspace/tree?recursive=true", nil)["entries"].([]any); len(es) != 0 {
		t.Errorf("refused uploads left files in the workspace: %v", es)
	}
}
