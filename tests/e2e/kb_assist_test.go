package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The rest of the original's knowledge routes: statistics and their
// repair, export in its four formats, sample questions and descriptions
// from a scripted model, a page fetched by URL through the SSRF guard and a
// workspace file imported through the provisioner, each then ingested as an
// upload; every bad input a 4xx with a code and nothing stored.
func TestKnowledgeAssistRoutes(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/guide.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<html><head><title>Guide</title></head><body><h1>Okapi guide</h1><p>The okapi eats leaves at dawn.</p></body></html>")
		case "/moved":
			http.Redirect(w, r, "/guide.html", http.StatusFound)
		case "/private":
			http.Redirect(w, r, "http://127.0.0.1:1/secret", http.StatusFound) // off the allow-list
		case "/data.json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	sb := provisionertest.Start(t, provisioner.Config{})
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": strings.TrimPrefix(site.URL, "http://")},
		local.WithSandbox(sb.Client, sandboxtool.Config{ExecTimeout: 60 * time.Second}))
	var prompts atomic.Value
	var reply atomic.Value
	reply.Store(`{"questions": ["How many vacation days are there?", "When are expenses due?"]}`)
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		prompts.Store(req.LastUserMessage())
		return llmtest.Text(reply.Load().(string))
	})
	c := p.Admin
	kbID := c.NewKnowledgeBase("handbook", "company handbook", nil)
	base := "/api/knowledge/databases/" + kbID
	files := c.Ingest(kbID, map[string][]byte{"vacation.md": []byte("# Vacation\n\nEvery employee has 25 vacation days.\n"),
		"expenses.md": []byte("# Expenses\n\nExpense reports are due in 30 days.\n")}, 60*time.Second)
	chunks := 0
	var vacationID string
	for id, f := range files {
		chunks += int(f["chunk_count"].(float64))
		if f["original_filename"] == "vacation.md" {
			vacationID = id
		}
	}
	wantCode := func(r testkit.Response, status int, code string) {
		t.Helper()
		if r.Status != status || r.Code() != code {
			t.Fatalf("want %d %s, got %d %s", status, code, r.Status, r.Body)
		}
	}

	// Statistics: the KBs the caller reads and their files.
	st := c.OK("GET", "/api/knowledge/stats", nil)["stats"].(map[string]any)
	if st["total_databases"] != float64(1) || st["total_files"] != float64(2) || st["kb_types"].(map[string]any)["milvus"] != float64(1) {
		t.Fatalf("stats: %v", st)
	}

	// Repair: a file whose counts drifted gets them back from its chunks.
	pool := p.P.App.Pool
	if _, err := pool.Exec(context.Background(), `UPDATE knowledge_files SET chunk_count = 0, token_count = 0 WHERE file_id = $1`, vacationID); err != nil {
		t.Fatal(err)
	}
	rep := c.OK("POST", base+"/stats/repair", nil)
	if rep["updated_files"] != float64(1) || rep["scanned_files"] != float64(2) || rep["stats"].(map[string]any)["chunk_count"] != float64(chunks) {
		t.Fatalf("repair: %v", rep)
	}
	if meta := c.OK("GET", base+"/documents/"+vacationID+"/basic", nil)["meta"].(map[string]any); meta["chunk_count"] != files[vacationID]["chunk_count"] ||
		meta["token_count"] != files[vacationID]["token_count"] {
		t.Fatalf("repaired file: %v, was %v", meta, files[vacationID])
	}
	if rep := c.OK("POST", base+"/stats/repair", nil); rep["updated_files"] != float64(0) {
		t.Fatalf("a second repair changed %v files", rep["updated_files"])
	}

	// Export: every chunk, in each format.
	r := c.Do("GET", base+"/export", nil)
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(r.Header.Get("Content-Disposition"), ".csv") {
		t.Fatalf("csv export: %d %v %s", r.Status, r.Header, r.Body)
	}
	rows, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	if err != nil || len(rows) != chunks+1 || rows[0][5] != "content" || !strings.Contains(string(r.Body), "25 vacation days") {
		t.Fatalf("csv rows (%v): %q", err, rows)
	}
	if r := c.Do("GET", base+"/export?format=md", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "## vacation.md") ||
		!strings.Contains(string(r.Body), "due in 30 days") {
		t.Fatalf("md export: %d %s", r.Status, r.Body)
	}
	if r := c.Do("GET", base+"/export?format=txt", nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "==== expenses.md ====") {
		t.Fatalf("txt export: %d %s", r.Status, r.Body)
	}
	r = c.Do("GET", base+"/export?format=xlsx", nil)
	zr, err := zip.NewReader(bytes.NewReader(r.Body), int64(len(r.Body)))
	if r.Status != http.StatusOK || err != nil {
		t.Fatalf("xlsx export: %d %v", r.Status, err)
	}
	sheet := ""
	for _, f := range zr.File {
		if f.Name == "xl/worksheets/sheet1.xml" {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			sheet = string(b)
		}
	}
	if strings.Count(sheet, "<row>") != chunks+1 || !strings.Contains(sheet, "25 vacation days") {
		t.Fatalf("xlsx sheet: %s", sheet)
	}
	wantCode(c.Do("GET", base+"/export?format=pdf", nil), 422, "invalid_export_format")
	wantCode(c.Do("GET", base+"/export?include_vectors=true", nil), 422, "vectors_not_exported")
	wantCode(c.Do("GET", base+"/export?include_vectors=maybe", nil), 422, "invalid_query")

	// Sample questions: none before; made from the file names and their
	// first chunk; a bad reply or count stores nothing; an empty KB is 400.
	if q := c.OK("GET", base+"/sample-questions", nil); q["count"] != float64(0) || len(q["questions"].([]any)) != 0 {
		t.Fatalf("questions before generation: %v", q)
	}
	q := c.OK("POST", base+"/sample-questions", map[string]any{"count": 2})
	if q["count"] != float64(2) || q["questions"].([]any)[0] != "How many vacation days are there?" {
		t.Fatalf("generated: %v", q)
	}
	if pr, _ := prompts.Load().(string); !strings.Contains(pr, "- vacation.md") || !strings.Contains(pr, "25 vacation days") || !strings.Contains(pr, "Write 2 questions") {
		t.Fatalf("the questions prompt lacks the files or their text: %s", pr)
	}
	reply.Store("I cannot help with that.")
	wantCode(c.Do("POST", base+"/sample-questions", map[string]any{"count": 3}), 422, "invalid_model_reply")
	wantCode(c.Do("POST", base+"/sample-questions", map[string]any{"count": 51}), 422, "invalid_count")
	wantCode(c.Do("POST", base+"/sample-questions", map[string]any{"count": "ten"}), 422, "invalid_request")
	if q := c.OK("GET", base+"/sample-questions", nil); q["count"] != float64(2) {
		t.Fatalf("a refused generation changed the stored questions: %v", q)
	}
	empty := c.NewKnowledgeBase("empty", "nothing yet", nil)
	wantCode(c.Do("POST", "/api/knowledge/databases/"+empty+"/sample-questions", map[string]any{}), 400, "knowledge_base_empty")

	// Description: written from the name, the current text and the files.
	reply.Store("  The company handbook: vacation days and expense deadlines.  ")
	d := c.OK("POST", "/api/knowledge/generate-description", map[string]any{"name": "handbook", "current_description": "rules",
		"file_list": []string{"vacation.md", "expenses.md"}})
	if d["description"] != "The company handbook: vacation days and expense deadlines." {
		t.Fatalf("description: %v", d)
	}
	if pr, _ := prompts.Load().(string); !strings.Contains(pr, "Knowledge base name: handbook") || !strings.Contains(pr, "- expenses.md") {
		t.Fatalf("description prompt: %s", pr)
	}
	wantCode(c.Do("POST", "/api/knowledge/generate-description", map[string]any{"name": "  "}), 422, "missing_name")

	// fetch-url: an HTML page (after a redirect) becomes an upload, which
	// is then ingested like any other.
	f := c.OK("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/moved", "kb_id": kbID})
	if f["final_url"] != site.URL+"/guide.html" || !strings.HasSuffix(f["filename"].(string), ".html") || f["size"].(float64) < 50 {
		t.Fatalf("fetched: %v", f)
	}
	added := c.AddDocuments(kbID, []string{f["file_path"].(string)}, nil)
	c.WaitFile(kbID, added[0], 60*time.Second, "indexed")
	if content := strings.Join(c.Content(kbID, added[0]).Lines, "\n"); !strings.Contains(content, "okapi eats leaves") {
		t.Fatalf("fetched page content: %s", content)
	}
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/guide.html", "kb_id": kbID}), 409, "duplicate_content")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/data.json", "kb_id": kbID}), 415, "unsupported_content_type")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/gone", "kb_id": kbID}), 422, "url_fetch_failed")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/private", "kb_id": kbID}), 403, "url_forbidden")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": "http://169.254.169.254/latest/meta-data", "kb_id": kbID}), 403, "url_forbidden")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": "file:///etc/passwd", "kb_id": kbID}), 422, "invalid_url")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/guide.html"}), 422, "missing_kb_id")
	wantCode(c.Do("POST", "/api/knowledge/files/fetch-url", map[string]any{"url": site.URL + "/guide.html", "kb_id": "kb_missing"}), 404, "kb_not_found")

	// import-workspace: a workspace file becomes an upload.
	c.OK("PUT", "/api/workspace/file", map[string]any{"path": "/notes/tapir.md", "content": "# Tapir\n\nThe tapir swims well.\n"})
	im := c.OK("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"/notes/tapir.md"}})
	items := im["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["filename"] != "tapir.md" || items[0].(map[string]any)["workspace_path"] != "/notes/tapir.md" {
		t.Fatalf("imported: %v", im)
	}
	added = c.AddDocuments(kbID, []string{items[0].(map[string]any)["file_path"].(string)}, nil)
	c.WaitFile(kbID, added[0], 60*time.Second, "indexed")
	if content := strings.Join(c.Content(kbID, added[0]).Lines, "\n"); !strings.Contains(content, "tapir swims well") {
		t.Fatalf("imported content: %s", content)
	}
	wantCode(c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"/notes/tapir.md"}}), 409, "duplicate_content")
	wantCode(c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"/notes/none.md"}}), 404, "file_not_found")
	wantCode(c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"/notes"}}), 400, "is_directory")
	wantCode(c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{"../../etc/passwd"}}), 403, "path_forbidden")
	wantCode(c.Do("POST", "/api/knowledge/files/import-workspace", map[string]any{"kb_id": kbID, "paths": []string{" "}}), 422, "missing_paths")

	// Statistics follow: four files now.
	if st := c.OK("GET", "/api/knowledge/stats", nil)["stats"].(map[string]any); st["total_files"] != float64(4) || st["total_databases"] != float64(2) {
		t.Fatalf("stats after imports: %v", st)
	}
}
