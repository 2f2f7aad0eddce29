package e2e

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Fixtures of the two-account suite for the file routes.

type call = func(c *testkit.Client) testkit.Response

// threadQuery: the viewer and mentions name A's thread by ?thread_id= (or
// the body's thread_id); B is answered 404 thread_not_found.
func threadQuery(attackers []caller, threadID string) fixture {
	q := "?thread_id=" + url.QueryEscape(threadID)
	get := func(path string) []call {
		return []call{func(c *testkit.Client) testkit.Response { return c.Do("GET", path, nil) }}
	}
	return fixture{status: []int{404}, codeOK: refusalCode, callers: attackers, call: map[string][]call{
		"GET /api/viewer/filesystem/tree":     get("/api/viewer/filesystem/tree" + q + "&path=/home/gem/user-data/uploads"),
		"GET /api/viewer/filesystem/file":     get("/api/viewer/filesystem/file" + q + "&path=/home/gem/user-data/uploads/alice-brief.txt"),
		"GET /api/viewer/filesystem/search":   get("/api/viewer/filesystem/search" + q + "&query=alice"),
		"GET /api/viewer/filesystem/download": get("/api/viewer/filesystem/download" + q + "&path=/home/gem/user-data/uploads"),
		"GET /api/mention/search":             get("/api/mention/search" + q + "&query=alice"),
		"DELETE /api/viewer/filesystem/file": {func(c *testkit.Client) testkit.Response {
			return c.Do("DELETE", "/api/viewer/filesystem/file"+q+"&path=/home/gem/user-data/uploads/alice-brief.txt", nil)
		}},
		"POST /api/viewer/filesystem/directory": {func(c *testkit.Client) testkit.Response {
			return c.Do("POST", "/api/viewer/filesystem/directory", map[string]any{"thread_id": threadID, "parent_path": "/home/gem/user-data/outputs", "name": "pwned"})
		}},
		"POST /api/viewer/filesystem/upload": {
			func(c *testkit.Client) testkit.Response {
				return postForm(c, "/api/viewer/filesystem/upload"+q, map[string]string{"parent_path": "/home/gem/user-data/outputs"}, "pwned.txt", []byte("pwned"))
			},
			func(c *testkit.Client) testkit.Response { // the thread in the form only
				return postForm(c, "/api/viewer/filesystem/upload", map[string]string{"thread_id": threadID, "parent_path": "/home/gem/user-data/outputs"}, "pwned.txt", []byte("pwned"))
			},
		},
	}}
}

// workspaceOwner: a path always resolves in the caller's own workspace: B
// naming A's file finds nothing in its own (404 file_not_found), and a
// path reaching for A's directory is refused (403 path_forbidden); the
// knowledge view passes the KB's read check (404/403 for A's KB).
func workspaceOwner(attackers []caller, aliceUID, kbID, docID string) fixture {
	escape := "../../" + aliceUID + "/workspace/alice-plan.md"
	get := func(path string) call {
		return func(c *testkit.Client) testkit.Response { return c.Do("GET", path, nil) }
	}
	return fixture{status: []int{403, 404}, codeOK: refusalCode, callers: attackers, call: map[string][]call{
		"GET /api/workspace/file": {get("/api/workspace/file?path=/alice-plan.md"), get("/api/workspace/file?path=" + url.QueryEscape(escape)),
			get("/api/workspace/file?path=/home/gem/user-data/uploads/alice-brief.txt")},
		"GET /api/workspace/download":           {get("/api/workspace/download?path=/alice-plan.md"), get("/api/workspace/download?path=" + url.QueryEscape(escape))},
		"GET /api/workspace/knowledge/file":     {get("/api/workspace/knowledge/file?path=/" + kbID + "/" + docID)},
		"GET /api/workspace/knowledge/download": {get("/api/workspace/knowledge/download?path=/" + kbID + "/" + docID)},
		"PUT /api/workspace/file": {func(c *testkit.Client) testkit.Response {
			return c.Do("PUT", "/api/workspace/file", map[string]any{"path": escape, "content": "pwned"})
		}},
		"DELETE /api/workspace/file": {get2("DELETE", "/api/workspace/file?path=/alice-plan.md"), get2("DELETE", "/api/workspace/file?path="+url.QueryEscape(escape))},
		"POST /api/workspace/directory": {func(c *testkit.Client) testkit.Response {
			return c.Do("POST", "/api/workspace/directory", map[string]any{"parent_path": "../../" + aliceUID + "/workspace", "name": "pwned"})
		}},
		"POST /api/workspace/upload": {func(c *testkit.Client) testkit.Response {
			return postForm(c, "/api/workspace/upload", map[string]string{"parent_path": "../../" + aliceUID + "/workspace"}, "pwned.txt", []byte("pwned"))
		}},
	}}
}

func get2(method, path string) call {
	return func(c *testkit.Client) testkit.Response { return c.Do(method, path, nil) }
}

// tmpAttachment: A's temporary attachment named in B's parse request.
func tmpAttachment(attackers []caller, object string) fixture {
	return fixture{status: []int{404}, codeOK: refusalCode, callers: attackers, call: map[string][]call{
		"POST /api/chat/attachments/tmp/parse": {func(c *testkit.Client) testkit.Response {
			return c.Do("POST", "/api/chat/attachments/tmp/parse", map[string]any{"object_name": object})
		}},
	}}
}

// postForm posts a multipart form with text fields and one file ("files").
func postForm(c *testkit.Client, path string, fields map[string]string, name string, data []byte) testkit.Response {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("files", name)
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest("POST", c.Base+path, &buf)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return testkit.Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}
