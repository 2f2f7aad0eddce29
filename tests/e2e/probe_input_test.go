package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Issue 9, findings 4 and 5, through the whole platform: input that reached
// PostgreSQL or the object store and answered 500 on main now answers a 4xx
// with a code, and a non-GET request with an unclean path is refused rather
// than redirected (a client that follows a 307 would replay the DELETE on
// the knowledge base itself).
func TestProbeBadInputNever500(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin.For(t)
	noFollow := *c
	noFollow.HTTP = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "probe", "description": "d"})["kb_id"].(string)
	base := "/api/knowledge/databases/" + kbID
	c.OK("POST", "/api/agent", map[string]any{"name": "probe agent", "slug": "probe-agent"})
	thread := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "probe-agent", "title": "t"})["id"].(string)

	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		// NUL in strings and ids.
		{"NUL in a JSON string", "POST", "/api/agent", `{"name": "a\u0000b"}`, 400, "invalid_json"},
		{"NUL in a path id", "GET", "/api/agent/a%00b", nil, 400, "invalid_path_param"},
		{"NUL in a KB id", "GET", "/api/knowledge/databases/kb%00x", nil, 400, "invalid_path_param"},
		{"NUL in a thread id", "PUT", "/api/chat/thread/t%00x", `{"title": "x"}`, 400, "invalid_path_param"},
		{"NUL in a query value", "GET", base + "/documents?keyword=a%00b", nil, 400, "invalid_query"},
		{"NUL in a thread title", "PUT", "/api/chat/thread/" + thread, `{"title": "a\u0000b"}`, 400, "invalid_json"},
		// Invalid UTF-8 in path ids.
		{"invalid UTF-8 agent id", "GET", "/api/agent/%ff%fe", nil, 400, "invalid_path_param"},
		{"invalid UTF-8 run id", "GET", "/api/agent/runs/%c3%28", nil, 400, "invalid_path_param"},
		{"invalid UTF-8 document id", "GET", base + "/documents/%ff", nil, 400, "invalid_path_param"},
		// Lone surrogates in JSON stored as JSONB.
		{"lone surrogate in agent config", "POST", "/api/agent", `{"name": "x", "config_json": {"context": {"system_prompt": "\ud800"}}}`, 400, "invalid_json"},
		{"lone low surrogate in share_config", "POST", "/api/agent", `{"name": "x", "share_config": {"version": 2, "read_scope": {"access_level": "user", "user_uids": ["\udc00"]}}}`, 400, "invalid_json"},
		{"lone surrogate in chunk config", "POST", base + "/documents", `{"items": ["kb/x"], "params": {"chunk_parser_config": {"separator": "\ud800"}}}`, 400, "invalid_json"},
		// Document items that are not uploads of this KB.
		{"item with ..", "POST", base + "/documents", map[string]any{"items": []string{"kb/" + kbID + "/upload/../../etc/passwd"}}, 422, "invalid_items"},
		{"item with //", "POST", base + "/documents", map[string]any{"items": []string{"kb/" + kbID + "/upload//x.md"}}, 422, "invalid_items"},
		{"item with NUL", "POST", base + "/documents", `{"items": ["kb/` + kbID + `/upload/1-a\u0000.md"]}`, 400, "invalid_json"},
		{"item with a raw ..", "POST", base + "/documents", map[string]any{"items": []string{"kb/" + kbID + "/upload/.."}}, 422, "invalid_items"},
		// Unclean paths on methods that change state.
		{"DELETE …/documents/%2e%2e", "DELETE", base + "/documents/%2e%2e", nil, 400, "unclean_path"},
		{"DELETE …/documents/..", "DELETE", base + "/documents/x/..", nil, 400, "unclean_path"},
		{"PUT with //", "PUT", "/api/agent//probe-agent", `{"name": "y"}`, 400, "unclean_path"},
		{"POST with /./", "POST", "/api/agent/./probe-agent/set_default", nil, 400, "unclean_path"},
	}
	for _, tc := range cases {
		r := noFollow.Do(tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.Code() != tc.code {
			t.Errorf("%s: %s %s: %d %s, want %d %s", tc.name, tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
		}
	}

	// Upload file names: over 255 bytes, or with a NUL.
	for name, data := range map[string]string{strings.Repeat("n", 256) + ".md": "# x\n", "a\x00b.md": "# y\n"} {
		r := c.Upload(kbID, name, []byte(data))
		if r.Status != 400 || (r.Code() != "invalid_file_name" && r.Code() != "invalid_multipart") {
			t.Errorf("upload %.20q…: %d %s, want 400 invalid_file_name", name, r.Status, r.Body)
		}
	}
	// 255 bytes pass the edge; the local store keeps the name in a file name
	// after a timestamp, so it refuses it with a code (an S3 store takes it).
	if r := c.Upload(kbID, strings.Repeat("n", 252)+".md", []byte("# long\n")); r.Status != 400 || r.Code() != "invalid_file_name" {
		t.Errorf("a 255-byte name: %d %s", r.Status, r.Body)
	}
	if r := c.Upload(kbID, strings.Repeat("n", 200)+".md", []byte("# ok\n")); r.Status != 200 {
		t.Errorf("a 203-byte name: %d %s", r.Status, r.Body)
	}

	// The KB and the agent are intact; GET still follows the mux's redirect.
	if r := c.Do("GET", base, nil); r.Status != 200 {
		t.Fatalf("the KB is gone after the unclean DELETE: %d %s", r.Status, r.Body)
	}
	if got := c.OK("GET", "/api/agent/probe-agent", nil)["name"]; got != "probe agent" {
		t.Fatalf("agent changed: %v", got)
	}
	if r := noFollow.Do("GET", "/api/agent//probe-agent", nil); r.Status/100 != 3 {
		t.Errorf("GET with // : %d, want the mux's redirect", r.Status)
	}
}

// Issue 9, finding 6: HTML and SVG uploads are served as attachments with a
// sandboxing Content-Security-Policy, never as active documents of the
// API's origin.
func TestProbeUploadsServedInert(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin.For(t)
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "inert", "description": "d"})["kb_id"].(string)
	for name, body := range map[string]string{
		"page.html": "<html><body><script>fetch('/api/auth/me')</script></body></html>",
	} {
		item := c.UploadKB(kbID, name, []byte(body))
		added := c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/add", map[string]any{"items": []string{item}})
		id := added["items"].([]any)[0].(map[string]any)["file_id"].(string)
		r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+id+"/download", nil)
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Disposition"), "attachment") ||
			r.Header.Get("Content-Security-Policy") != "sandbox" || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s download: %d %v", name, r.Status, r.Header)
		}
	}
}
