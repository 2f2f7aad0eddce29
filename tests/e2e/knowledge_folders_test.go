package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The document-management routes around the pipeline: files registered
// without processing (documents/add) wait as uploaded until parse-pending
// sends them on; index-pending retries failed indexing; documents/exists
// finds a file by name or folder path; files and folders move and folders
// are renamed, with clear errors for impossible moves.
func TestKnowledgePendingExistsMoveRename(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	pool := p.P.App.Pool
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "archive", "description": "folders"})["kb_id"].(string)
	base := "/api/knowledge/databases/" + kbID

	// Registered only: nothing parses them.
	items := []string{
		c.UploadKB(kbID, "alpha.md", []byte("# Alpha\n\nThe alpha valve is checked weekly.\n")),
		c.UploadKB(kbID, "beta.txt", []byte("The beta pump runs at night.\n")),
	}
	added := c.OK("POST", base+"/documents/add", map[string]any{"items": items, "params": map[string]any{}})
	if added["added"] != float64(2) {
		t.Fatalf("documents/add: %v", added)
	}
	status := func() map[string]string {
		out := map[string]string{}
		for _, f := range c.KBFiles(kbID) {
			if f["is_folder"] != true {
				out[f["original_filename"].(string)] = f["status"].(string)
			}
		}
		return out
	}
	if st := status(); st["alpha.md"] != "uploaded" || st["beta.txt"] != "uploaded" {
		t.Fatalf("registered files: %v", st)
	}
	waitIndexed := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := status()
			done := 0
			for _, s := range st {
				if s == "indexed" {
					done++
				}
			}
			if done == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("files: %v, want %d indexed", st, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if r := c.OK("POST", base+"/documents/parse-pending", nil); r["status"] != "queued" || r["queued_count"] != float64(2) {
		t.Fatalf("parse-pending: %v", r)
	}
	waitIndexed(2)
	if r := c.OK("POST", base+"/documents/parse-pending", map[string]any{"params": map[string]any{}}); r["status"] != "success" || r["queued_count"] != float64(0) {
		t.Errorf("parse-pending with nothing pending: %v", r)
	}

	// index-pending picks up a file whose indexing failed.
	ids := map[string]string{}
	for _, f := range c.KBFiles(kbID) {
		ids[f["original_filename"].(string)] = f["file_id"].(string)
	}
	if _, err := pool.Exec(t.Context(), `UPDATE knowledge_files SET status = 'error_indexing', error_message = 'provider down' WHERE file_id = $1`, ids["beta.txt"]); err != nil {
		t.Fatal(err)
	}
	if r := c.OK("POST", base+"/documents/index-pending", map[string]any{"params": map[string]any{"chunk_preset_id": "general"}}); r["queued_count"] != float64(1) {
		t.Fatalf("index-pending: %v", r)
	}
	waitIndexed(2)
	if r := c.Do("POST", base+"/documents/index-pending", map[string]any{"params": map[string]any{"chunk_parser_config": map[string]any{"chunk_token_num": -3}}}); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("index-pending with a bad chunk config: %d %s", r.Status, r.Body)
	}

	// Folders: Reports/2024; alpha moves in.
	reports := c.OK("POST", base+"/folders", map[string]any{"folder_name": "Reports"})["file_id"].(string)
	y2024 := c.OK("POST", base+"/folders", map[string]any{"folder_name": "2024", "parent_id": reports})["file_id"].(string)
	moved := c.OK("PUT", base+"/documents/"+ids["alpha.md"]+"/move", map[string]any{"new_parent_id": y2024})
	if moved["parent_id"] != y2024 {
		t.Fatalf("move: %v", moved)
	}
	exists := func(name string) bool {
		t.Helper()
		r := c.OK("GET", base+"/documents/exists?filename="+name, nil)
		if r["kb_id"] != kbID || r["filename"] == nil {
			t.Fatalf("exists %s: %v", name, r)
		}
		return r["exists"] == true
	}
	for name, want := range map[string]bool{
		"alpha.md": true, "Reports/2024/alpha.md": true, "Reports/alpha.md": false, "beta.txt": true,
		"gamma.md": false, "Reports": false, "Reports/2024": false, "Reports/2024/beta.txt": false,
	} {
		if got := exists(name); got != want {
			t.Errorf("exists %q = %v, want %v", name, got, want)
		}
	}
	// Renamed: the path follows.
	if r := c.OK("PUT", base+"/folders/"+y2024+"/rename", map[string]any{"folder_name": "2025"}); r["filename"] != "2025" {
		t.Errorf("rename: %v", r)
	}
	if !exists("Reports/2025/alpha.md") || exists("Reports/2024/alpha.md") {
		t.Error("the path does not follow the rename")
	}
	// Back to the root.
	if r := c.OK("PUT", base+"/documents/"+ids["alpha.md"]+"/move", map[string]any{"new_parent_id": nil}); r["parent_id"] != nil {
		t.Errorf("move to the root: %v", r)
	}

	// What cannot be done says why, and changes nothing.
	c.OK("POST", base+"/folders", map[string]any{"folder_name": "2025"}) // a root folder named like the subfolder
	c.OK("POST", base+"/folders", map[string]any{"folder_name": "Q1", "parent_id": reports})
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"folder into itself", "PUT", "/documents/" + reports + "/move", map[string]any{"new_parent_id": reports}, 422, "invalid_move"},
		{"folder below itself", "PUT", "/documents/" + reports + "/move", map[string]any{"new_parent_id": y2024}, 422, "invalid_move"},
		{"into a file", "PUT", "/documents/" + ids["beta.txt"] + "/move", map[string]any{"new_parent_id": ids["alpha.md"]}, 404, "folder_not_found"},
		{"into nowhere", "PUT", "/documents/" + ids["beta.txt"] + "/move", map[string]any{"new_parent_id": "file_nope"}, 404, "folder_not_found"},
		{"unknown file", "PUT", "/documents/file_nope/move", map[string]any{"new_parent_id": nil}, 404, "file_not_found"},
		{"next to a same-named folder", "PUT", "/documents/" + y2024 + "/move", map[string]any{"new_parent_id": nil}, 409, "folder_exists"},
		{"rename to its own name", "PUT", "/folders/" + y2024 + "/rename", map[string]any{"folder_name": "2025 "}, 200, ""},
		{"rename to a sibling's name", "PUT", "/folders/" + y2024 + "/rename", map[string]any{"folder_name": "Q1"}, 409, "folder_exists"},
		{"rename with a slash", "PUT", "/folders/" + y2024 + "/rename", map[string]any{"folder_name": "a/b"}, 422, "invalid_folder"},
		{"rename a file", "PUT", "/folders/" + ids["beta.txt"] + "/rename", map[string]any{"folder_name": "x"}, 404, "folder_not_found"},
		{"exists without a name", "GET", "/documents/exists?filename=%20", nil, 400, "invalid_filename"},
		{"exists with a relative segment", "GET", "/documents/exists?filename=Reports/../beta.txt", nil, 400, "invalid_filename"},
		{"pending in an unknown KB", "POST", "/../kb_nope/documents/parse-pending", nil, 404, "kb_not_found"},
	} {
		path := base + tc.path
		if tc.name == "pending in an unknown KB" {
			path = "/api/knowledge/databases/kb_nope/documents/parse-pending"
		}
		r := c.Do(tc.method, path, tc.body)
		if r.Status != tc.status || (tc.code != "" && r.Code() != tc.code) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	if st := status(); st["alpha.md"] != "indexed" || st["beta.txt"] != "indexed" {
		t.Errorf("after the refused moves: %v", st)
	}
}

// Parsed Markdown can be corrected before indexing: the save names the
// revision read with the content, a stale one is refused (409) and changes
// nothing, and indexing then uses the edit. /files/markdown parses a file
// without storing it.
func TestKnowledgeEditParsedMarkdown(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "edits", "description": "corrections"})["kb_id"].(string)
	base := "/api/knowledge/databases/" + kbID
	item := c.UploadKB(kbID, "scan.md", []byte("# Pump\n\nThe pump is primed with 5O litres.\n"))
	id := c.AddDocuments(kbID, []string{item}, map[string]any{"auto_index": false})[0]
	deadline := time.Now().Add(30 * time.Second)
	for c.FileMeta(kbID, id)["status"] != "parsed" {
		if time.Now().After(deadline) {
			t.Fatalf("file not parsed: %v", c.FileMeta(kbID, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	read := c.OK("GET", base+"/documents/"+id+"/content", nil)
	rev, _ := read["content_revision"].(string)
	if rev == "" || !strings.Contains(read["content"].(string), "5O litres") {
		t.Fatalf("content: %v", read)
	}
	put := func(content, revision string) testkit.Response {
		return c.Do("PUT", base+"/documents/"+id+"/content", map[string]any{"content": content, "revision": revision})
	}
	fixed := "# Pump\n\nThe pump is primed with 50 litres of glycol.\n"
	saved := put(fixed, rev)
	if saved.Status != http.StatusOK || saved.JSON()["status"] != "success" {
		t.Fatalf("save: %d %s", saved.Status, saved.Body)
	}
	rev2, _ := saved.JSON()["content_revision"].(string)
	if rev2 == "" || rev2 == rev {
		t.Errorf("the save did not move the revision: %q → %q", rev, rev2)
	}
	// A second editor still holding the first revision is refused.
	if r := put("# Pump\n\nsomething else\n", rev); r.Status != http.StatusConflict || r.Code() != "revision_conflict" {
		t.Errorf("stale save: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		content, revision string
		status            int
		code              string
	}{
		{"  \n", rev2, 400, "empty_content"},
		{"x", "yesterday", 400, "invalid_revision"},
	} {
		if r := put(tc.content, tc.revision); r.Status != tc.status || r.Code() != tc.code {
			t.Errorf("save %q/%q: %d %s", tc.content, tc.revision, r.Status, r.Body)
		}
	}
	if got := c.OK("GET", base+"/documents/"+id+"/content", nil); got["content"] != fixed || got["content_revision"] != rev2 {
		t.Fatalf("after the refused saves: %v", got)
	}
	// Two editors saving from the same revision at once: one wins.
	statuses := make(chan int, 2)
	for i := range 2 {
		go func() { statuses <- put(fmt.Sprintf("# Pump\n\nrace %d\n", i), rev2).Status }()
	}
	if a, b := <-statuses, <-statuses; a+b != http.StatusOK+http.StatusConflict {
		t.Fatalf("concurrent saves: %d and %d, want one 200 and one 409", a, b)
	}
	got := c.OK("GET", base+"/documents/"+id+"/content", nil)
	if !strings.HasPrefix(got["content"].(string), "# Pump\n\nrace ") {
		t.Fatalf("after the race: %v", got)
	}
	rev2 = got["content_revision"].(string)
	if saved := put(fixed, rev2); saved.Status != http.StatusOK {
		t.Fatalf("save after the race: %d %s", saved.Status, saved.Body)
	}

	// One Markdown object is left: the replaced ones are gone.
	objs, err := p.P.App.Knowledge.Blob.List(t.Context(), "kb/"+kbID+"/files/"+id+"/")
	if err != nil || len(objs) != 1 || !strings.HasSuffix(objs[0].Key, ".md") {
		t.Errorf("stored Markdown: %v %v", objs, err)
	}

	// Indexing uses the edit; an indexed file is no longer editable.
	c.OK("POST", base+"/documents/index", map[string]any{"file_ids": []string{id}})
	for c.FileMeta(kbID, id)["status"] != "indexed" {
		if time.Now().After(deadline) {
			t.Fatalf("file not indexed: %v", c.FileMeta(kbID, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h := c.QueryKB(kbID, "glycol", "keyword"); len(h) != 1 {
		t.Errorf("the edit is not what was indexed: %v", h)
	}
	if h := c.QueryKB(kbID, "5O", "keyword"); len(h) != 0 {
		t.Errorf("the original text was indexed: %v", h)
	}
	if r := put(fixed+"more\n", c.OK("GET", base+"/documents/"+id+"/content", nil)["content_revision"].(string)); r.Status != http.StatusConflict || r.Code() != "file_state_conflict" {
		t.Errorf("save of an indexed file: %d %s", r.Status, r.Body)
	}

	// /files/markdown: parse only.
	r := c.PostFile("/api/knowledge/files/markdown", "note.html", []byte("<h1>Title</h1><p>Body <b>bold</b></p>"))
	if r.Status != http.StatusOK || !strings.Contains(r.JSON()["markdown_content"].(string), "# Title") || !strings.Contains(r.JSON()["markdown_content"].(string), "**bold**") {
		t.Errorf("files/markdown: %d %s", r.Status, r.Body)
	}
	if r := c.PostFile("/api/knowledge/files/markdown", "tool.exe", []byte("MZ")); r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("files/markdown of an exe: %d %s", r.Status, r.Body)
	}
	if r := c.PostFile("/api/knowledge/files/markdown", "empty.md", nil); r.Status != http.StatusUnprocessableEntity || r.Code() != "empty_file" {
		t.Errorf("files/markdown of an empty file: %d %s", r.Status, r.Body)
	}
}
