package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Who may do what with a knowledge base: its creator and superadmins
// manage it; share_config (version 2: global, department or user scopes,
// read and manage) grants others read or manage access, capped by role
// (plain users read at most, and only through the external routes); a KB
// the caller may not read is indistinguishable from a missing one; a
// revoked share stops working at once, for tokens issued before it.

// wantAnswer asserts a call's status and error code (code "" for success).
func wantAnswer(t *testing.T, who string, r testkit.Response, status int, code string, call string) {
	t.Helper()
	if r.Status != status || r.Code() != code {
		t.Errorf("%s: %s: %d %s, want %d %q", who, call, r.Status, r.Body, status, code)
	}
}

// kbIDs lists the kb_ids of a {"databases":[…]} answer.
func kbIDs(t *testing.T, c *testkit.Client, path string) map[string]string {
	t.Helper()
	var out struct {
		Databases []map[string]any `json:"databases"`
	}
	r := c.Do("GET", path, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	r.Decode(t, &out)
	ids := map[string]string{}
	for _, d := range out.Databases {
		perm, _ := d["permission"].(string)
		ids[d["kb_id"].(string)] = perm
	}
	return ids
}

func TestKnowledgeAccess(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	super := p.Admin // the first administrator is the superadmin
	var research int64
	if err := p.P.App.Pool.QueryRow(t.Context(), `INSERT INTO departments (name) VALUES ('research') RETURNING id`).Scan(&research); err != nil {
		t.Fatal(err)
	}
	owner := super.CreateUser("kb-owner", "admin", nil)
	outsider := super.CreateUser("kb-outsider", "admin", nil)
	reader := super.CreateUser("reader", "user", nil)
	stranger := super.CreateUser("stranger", "user", nil)
	researcher := super.CreateUser("researcher", "user", &research)

	kbID := owner.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "owner's handbook", "description": "private at first"})["kb_id"].(string)
	base := "/api/knowledge/databases/" + kbID
	ext := "/api/knowledge/databases/external/" + kbID
	var lines []string
	for i := 1; i <= 30; i++ {
		if i == 20 {
			lines = append(lines, "The pangolin protocol requires two keys.")
			continue
		}
		lines = append(lines, fmt.Sprintf("Handbook line %d.", i))
	}
	handbook := strings.Join(lines, "\n") + "\n"
	ids := owner.AddDocuments(kbID, []string{
		owner.UploadKB(kbID, "handbook.md", []byte(handbook)),
		owner.UploadKB(kbID, "chart.zip", docparsetest.MinerUBundle("# Chart\n\n![c](images/c.png)\n\nThe tapir chart.\n", map[string][]byte{"c.png": docparsetest.PNG()})),
	}, nil)
	docID, bundleID := ids[0], ids[1]
	owner.WaitFile(kbID, docID, ingestWait, "indexed")
	owner.WaitFile(kbID, bundleID, ingestWait, "indexed")
	image := ""
	for _, l := range owner.Content(kbID, bundleID).Lines {
		if i := strings.Index(l, "(/api/knowledge/databases/"); i >= 0 {
			image = strings.TrimSuffix(l[i+1:], ")")
		}
	}
	if image == "" {
		t.Fatal("no image link in the bundle")
	}
	share := func(cfg any) {
		t.Helper()
		r := owner.Do("PUT", base, map[string]any{"share_config": cfg})
		if r.Status != http.StatusOK || r.JSON()["permission"] != "manage" {
			t.Fatalf("share %v: %d %s", cfg, r.Status, r.Body)
		}
	}
	query := map[string]any{"query": "pangolin protocol", "meta": map[string]any{"search_mode": "keyword"}}

	// canManage: every management route answers as it should for a manager.
	canManage := func(who string, c *testkit.Client) {
		t.Helper()
		k := c.OK("GET", base, nil)
		if k["permission"] != "manage" {
			t.Errorf("%s: permission %v, want manage", who, k["permission"])
		}
		wantAnswer(t, who, c.Do("PUT", base, map[string]any{"description": "edited by " + who}), 200, "", "update")
		wantAnswer(t, who, c.Do("GET", base+"/documents", nil), 200, "", "documents")
		wantAnswer(t, who, c.Do("PUT", base+"/query-params", map[string]any{"final_top_k": 5}), 200, "", "query params")
		wantAnswer(t, who, c.Do("POST", base+"/folders", map[string]any{"folder_name": "by " + who}), 200, "", "create folder")
		if hits := c.Search(kbID, "pangolin protocol", map[string]any{"search_mode": "keyword"}); len(hits) == 0 || hits[0]["file_id"] != docID {
			t.Errorf("%s: query %v", who, hits)
		}
	}
	// canRead: read routes work, every management route is refused with
	// 403 kb_manage_forbidden, and none of the refused calls changed anything.
	canRead := func(who string, c *testkit.Client) {
		t.Helper()
		k := c.OK("GET", base, nil)
		if k["permission"] != "read" {
			t.Errorf("%s: permission %v, want read", who, k["permission"])
		}
		wantAnswer(t, who, c.Do("POST", base+"/query", query), 200, "", "query")
		wantAnswer(t, who, c.Do("GET", base+"/documents", nil), 200, "", "documents")
		wantAnswer(t, who, c.Do("GET", base+"/documents/"+docID+"/content", nil), 200, "", "content")
		wantAnswer(t, who, c.Do("GET", image, nil), 200, "", "image")
		if got := kbIDs(t, c, "/api/knowledge/databases/accessible"); got[kbID] != "read" {
			t.Errorf("%s: accessible %v", who, got)
		}
		before := super.OK("GET", base, nil)
		for _, call := range []struct{ method, path string }{
			{"PUT", base}, {"DELETE", base}, {"POST", base + "/documents"}, {"POST", base + "/documents/add"},
			{"POST", base + "/documents/parse"}, {"POST", base + "/documents/index"}, {"DELETE", base + "/documents/" + docID},
			{"DELETE", base + "/documents/batch"}, {"POST", base + "/folders"}, {"PUT", base + "/query-params"}, {"POST", base + "/sources"},
		} {
			body := map[string]any{"description": "hijacked", "share_config": map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "global"}},
				"items": []string{"kb/" + kbID + "/upload/1-x.md"}, "file_ids": []string{docID}, "folder_name": "f", "final_top_k": 1,
				"provider": "s3", "bucket": "b"}
			wantAnswer(t, who, c.Do(call.method, call.path, body), 403, "kb_manage_forbidden", call.method+" "+call.path)
		}
		wantAnswer(t, who, c.Upload(kbID, "intruder.md", []byte("# Intruder\n")), 403, "kb_manage_forbidden", "upload")
		after := super.OK("GET", base, nil)
		if after["description"] != before["description"] || string(mustJSON(after["share_config"])) != string(mustJSON(before["share_config"])) ||
			after["file_count"] != before["file_count"] {
			t.Errorf("%s: refused calls changed the KB: %v → %v", who, before, after)
		}
		if m := super.FileMeta(kbID, docID); m["status"] != "indexed" {
			t.Errorf("%s: refused calls touched the file: %v", who, m)
		}
	}
	// cannotSee: the KB is as missing as one that does not exist.
	cannotSee := func(who string, c *testkit.Client, admin bool) {
		t.Helper()
		if admin {
			for _, call := range []struct{ method, path string }{
				{"GET", base}, {"PUT", base}, {"DELETE", base}, {"POST", base + "/query"}, {"POST", base + "/query-test"},
				{"GET", base + "/documents"}, {"GET", base + "/documents/" + docID}, {"GET", base + "/documents/" + docID + "/basic"},
				{"GET", base + "/documents/" + docID + "/content"}, {"GET", base + "/documents/" + docID + "/download"},
				{"GET", base + "/query-params"}, {"GET", base + "/events"}, {"GET", base + "/sources"},
			} {
				wantAnswer(t, who, c.Do(call.method, call.path, query), 404, "kb_not_found", call.method+" "+call.path)
			}
			wantAnswer(t, who, c.Upload(kbID, "intruder.md", []byte("# Intruder\n")), 404, "kb_not_found", "upload")
			if _, ok := kbIDs(t, c, "/api/knowledge/databases")[kbID]; ok {
				t.Errorf("%s: the KB is listed", who)
			}
		}
		wantAnswer(t, who, c.Do("GET", ext+"/files", nil), 404, "kb_not_found", "external files")
		wantAnswer(t, who, c.Do("POST", ext+"/retrieve", query), 404, "kb_not_found", "external retrieve")
		wantAnswer(t, who, c.Do("GET", ext+"/files/"+docID+"/open", nil), 404, "kb_not_found", "external open")
		wantAnswer(t, who, c.Do("POST", ext+"/files/"+docID+"/find", map[string]any{"patterns": []string{"pangolin"}}), 404, "kb_not_found", "external find")
		wantAnswer(t, who, c.Do("GET", image, nil), 404, "kb_not_found", "image")
		for _, list := range []string{"/api/knowledge/databases/accessible", "/api/knowledge/databases/external"} {
			if _, ok := kbIDs(t, c, list)[kbID]; ok {
				t.Errorf("%s: the KB is in %s", who, list)
			}
		}
	}
	// readsExternally: a reader's whole CLI surface works on the KB.
	readsExternally := func(who string, c *testkit.Client) {
		t.Helper()
		if _, ok := kbIDs(t, c, "/api/knowledge/databases/external")[kbID]; !ok {
			t.Errorf("%s: the KB is not in the external list", who)
		}
		var files struct {
			Files []map[string]any `json:"files"`
			Total int              `json:"total"`
		}
		c.Do("GET", ext+"/files", nil).Decode(t, &files)
		var names []string
		for _, f := range files.Files {
			if f["is_folder"] == false {
				names = append(names, f["filename"].(string))
			}
		}
		if slices.Sort(names); !slices.Equal(names, []string{"chart.zip", "handbook.md"}) || files.Total != len(files.Files) {
			t.Errorf("%s: external files %v of %d", who, names, files.Total)
		}
		var found struct {
			KBID    string           `json:"kb_id"`
			Results []map[string]any `json:"results"`
		}
		c.Do("POST", ext+"/retrieve", map[string]any{"query": "pangolin protocol", "options": map[string]any{"search_mode": "keyword"}}).Decode(t, &found)
		if found.KBID != kbID || len(found.Results) == 0 || found.Results[0]["file_id"] != docID || !strings.Contains(found.Results[0]["content"].(string), "pangolin protocol") {
			t.Errorf("%s: retrieve %+v", who, found)
		}
		var win struct {
			StartLine, EndLine, TotalLines int
			HasMoreBefore                  bool `json:"has_more_before"`
			HasMoreAfter                   bool `json:"has_more_after"`
			NextOffset                     *int `json:"next_offset"`
			Content                        string
		}
		r := c.Do("GET", ext+"/files/"+docID+"/open?offset=15&limit=10", nil)
		r.Decode(t, &win)
		var raw map[string]any
		r.Decode(t, &raw)
		wantContent := ""
		for i := 16; i <= 25; i++ {
			if i > 16 {
				wantContent += "\n"
			}
			wantContent += fmt.Sprintf("%6d\t%s", i, lines[i-1])
		}
		if raw["start_line"] != float64(16) || raw["end_line"] != float64(25) || raw["total_lines"] != float64(30) || !win.HasMoreBefore ||
			!win.HasMoreAfter || win.NextOffset == nil || *win.NextOffset != 25 || raw["content"] != wantContent {
			t.Errorf("%s: open window %s", who, r.Body)
		}
		last := c.Do("GET", ext+"/files/"+docID+"/open?offset=25&limit=10", nil).JSON()
		if last["end_line"] != float64(30) || last["has_more_after"] != false || last["next_offset"] != nil {
			t.Errorf("%s: last window %v", who, last)
		}
		wantAnswer(t, who, c.Do("GET", ext+"/files/"+docID+"/open?offset=30", nil), 422, "offset_out_of_range", "open past the end")
		res := c.Do("POST", ext+"/files/"+docID+"/find", map[string]any{"patterns": []string{"PANGOLIN"}, "window_size": 4}).JSON()
		windows, _ := res["windows"].([]any)
		if res["total_matches"] != float64(1) || len(windows) != 1 {
			t.Fatalf("%s: find %v", who, res)
		}
		w := windows[0].(map[string]any)
		if !slices.Equal(w["matched_lines"].([]any), []any{float64(20)}) || w["start_line"] != float64(18) || w["end_line"] != float64(21) ||
			!strings.Contains(w["content"].(string), "    20\tThe pangolin protocol requires two keys.") {
			t.Errorf("%s: find window %v", who, w)
		}
		wantAnswer(t, who, c.Do("GET", image, nil), 200, "", "image")
	}
	userRefusedAdminRoutes := func(who string, c *testkit.Client) {
		t.Helper()
		for _, call := range []struct{ method, path string }{
			{"GET", "/api/knowledge/databases"}, {"GET", base}, {"POST", base + "/query"}, {"GET", base + "/documents"},
			{"GET", base + "/documents/" + docID + "/content"}, {"PUT", base}, {"POST", "/api/knowledge/databases"},
		} {
			wantAnswer(t, who, c.Do(call.method, call.path, query), 403, "admin_required", call.method+" "+call.path)
		}
		wantAnswer(t, who, c.Upload(kbID, "intruder.md", []byte("# Intruder\n")), 403, "admin_required", "upload")
	}

	// Private: only the creator and the superadmin.
	canManage("creator", owner)
	canManage("superadmin", super)
	cannotSee("admin without a share", outsider, true)
	cannotSee("user without a share", reader, false)
	userRefusedAdminRoutes("user", reader)
	if r := owner.As("").Do("GET", ext+"/files", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("external files without a token: %d %s", r.Status, r.Body)
	}

	// Shared for reading with one admin and one user, by uid.
	share(map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "user", "user_uids": []string{"kb-outsider", "reader"}}})
	canRead("admin with a read share", outsider)
	readsExternally("admin with a read share", outsider)
	readsExternally("user with a read share", reader)
	userRefusedAdminRoutes("user with a read share", reader)
	cannotSee("user outside the share", stranger, false)
	cannotSee("user of another department", researcher, false)

	// A reader's open event stream while the share is revoked below.
	readerEvents := testkit.WatchKB(t, outsider, kbID)
	readerEvents.Wait(t, docID, "indexed", 1, ingestWait)

	// Shared with a department: its members read, the named users no longer.
	share(map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "department", "department_ids": []int64{research}}})
	readsExternally("user of the department", researcher)
	cannotSee("user outside the department", reader, false)
	cannotSee("admin outside the department", outsider, true)

	// Everyone reads; one admin manages. A plain user stays a reader
	// whatever manage_scope says.
	share(map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "global"},
		"manage_scope": map[string]any{"access_level": "user", "user_uids": []string{"kb-outsider", "stranger"}}})
	canManage("admin with a manage share", outsider)
	readsExternally("user with a manage share", stranger)
	userRefusedAdminRoutes("user with a manage share", stranger)
	readsExternally("any user", reader)
	if got := kbIDs(t, stranger, "/api/knowledge/databases/accessible"); got[kbID] != "read" {
		t.Errorf("a plain user's permission under a manage share: %v", got)
	}
	// manage_scope must lie within read_scope.
	r := owner.Do("PUT", base, map[string]any{"share_config": map[string]any{"version": 2,
		"read_scope":   map[string]any{"access_level": "user", "user_uids": []string{"reader"}},
		"manage_scope": map[string]any{"access_level": "department", "department_ids": []int64{research}}}})
	wantAnswer(t, "creator", r, 422, "invalid_share_config", "manage wider than read")

	// Revoked ("share_config": null: private again): refused at once, with
	// the tokens issued while it was shared.
	share(nil)
	if k := super.OK("GET", base, nil); string(mustJSON(k["share_config"])) != "null" {
		t.Fatalf("share_config after the revocation: %v", k["share_config"])
	}
	cannotSee("admin after the revocation", outsider, true)
	cannotSee("user after the revocation", reader, false)
	cannotSee("department after the revocation", researcher, false)
	canManage("creator after the revocation", owner)

	// The event stream opened while the admin could read the KB tells them
	// nothing about files added after access ended: it closes instead.
	ownerEvents := testkit.WatchKB(t, owner, kbID)
	newID := owner.AddDocuments(kbID, []string{owner.UploadKB(kbID, "after.md", []byte("# After\n\nAdded after the revocation.\n"))}, nil)[0]
	ownerEvents.Wait(t, newID, "indexed", 1, ingestWait)
	select {
	case <-readerEvents.Done():
	case <-time.After(5 * time.Second):
		t.Error("the revoked admin's event stream is still open after new notices")
	}
	if got := readerEvents.Statuses(newID); len(got) != 0 {
		t.Errorf("the revoked admin's event stream told them about %s: %v", newID, got)
	}
}
