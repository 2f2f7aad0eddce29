package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Bad input to the knowledge routes: every refusal has a status and a
// machine-readable code (upload-time) or ends the file in error_parsing
// with a message saying why (parse-time), and none of it disturbs a file
// that was indexed before.

func TestKnowledgeBadInput(t *testing.T) {
	t.Parallel()
	s3 := testkit.NewFakeS3(t)
	p := testkit.StartLocal(t, s3.SourceEnv())
	c := p.Admin
	kbID := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "bad input", "description": "hostile files"})["kb_id"].(string)
	kbPath := "/api/knowledge/databases/" + kbID

	// A file indexed before anything goes wrong.
	baseID := c.AddDocuments(kbID, []string{c.UploadKB(kbID, "baseline.md", []byte("# Baseline\n\nThe narwhal ledger lists every harbour fee.\n"))}, nil)[0]
	baseMeta := c.WaitFile(kbID, baseID, ingestWait, "indexed")
	baseDoc := c.Content(kbID, baseID)
	baselineIntact := func(t *testing.T, c *testkit.Client) {
		t.Helper()
		meta, doc := c.FileMeta(kbID, baseID), c.Content(kbID, baseID)
		if meta["status"] != "indexed" || meta["chunk_count"] != baseMeta["chunk_count"] || meta["updated_at"] != baseMeta["updated_at"] {
			t.Errorf("baseline file changed: %v (was %v)", meta, baseMeta)
		}
		if doc.Content != baseDoc.Content || !slices.Equal(doc.ChunkIDs(), baseDoc.ChunkIDs()) {
			t.Errorf("baseline content or chunks changed: %+v (was %+v)", doc, baseDoc)
		}
		hits := c.Search(kbID, "narwhal ledger", map[string]any{"search_mode": "keyword"})
		if len(hits) != 1 || hits[0]["file_id"] != baseID {
			t.Errorf("baseline search: %v", hits)
		}
	}

	t.Run("parse failures", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		cases := []struct {
			name string
			data []byte
			why  []string // the stored message mentions each
		}{
			{"corrupt.pdf", docparsetest.CorruptPDF(), []string{"corrupt.pdf", "could not be read as a PDF"}},
			{"locked.pdf", docparsetest.EncryptedPDF("s3cret", docparsetest.TextPage("Salaries of the okapi keepers.")), []string{"locked.pdf", "password"}},
			{"bomb.zip", docparsetest.ZipBomb(32 << 20), []string{"bomb.zip", "full.md", "zip bomb"}},
			{"slip.zip", docparsetest.ZipPathEscape(), []string{"slip.zip", `"../x.md"`, "outside the archive"}},
			{"crowded.zip", docparsetest.ZipManyEntries(1001), []string{"crowded.zip", "1001 entries", "limit is 1000"}},
		}
		items := make([]string, len(cases))
		for i, tc := range cases {
			items[i] = c.UploadKB(kbID, tc.name, tc.data)
		}
		ids := c.AddDocuments(kbID, items, nil)
		for i, tc := range cases {
			meta := c.WaitFile(kbID, ids[i], ingestWait, "error_parsing")
			msg, _ := meta["error_message"].(string)
			for _, w := range tc.why {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error message %q does not mention %q", tc.name, msg, w)
				}
			}
			doc := c.Content(kbID, ids[i])
			if len(doc.Chunks) != 0 || doc.Content != "" || meta["chunk_count"].(float64) != 0 {
				t.Errorf("%s: a failed file has content %q and %d chunks", tc.name, doc.Content, len(doc.Chunks))
			}
		}
		// The encrypted file's text is nowhere.
		if hits := c.Search(kbID, "okapi keepers", map[string]any{"search_mode": "keyword"}); len(hits) != 0 {
			t.Errorf("text of the encrypted PDF was indexed: %v", hits)
		}
		// Nothing of the archives was unpacked into the object store.
		for i, tc := range cases {
			if n := blobBytes(t, filepath.Join(p.BlobDir, "kb", kbID, "files", ids[i])); n != 0 {
				t.Errorf("%s left %d bytes of parsed output in the object store", tc.name, n)
			}
		}
		baselineIntact(t, c)
	})

	t.Run("upload refusals", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		supported := c.OK("GET", "/api/knowledge/files/supported-types", nil)["file_types"].([]any)
		cases := []struct {
			name   string
			data   []byte
			status int
			code   string
			says   string
		}{
			{"empty.txt", nil, http.StatusUnprocessableEntity, "empty_file", "empty.txt is empty"},
			{"chart.pdf", docparsetest.PNG(), http.StatusUnsupportedMediaType, "wrong_file_type", "PNG image"},
			{"notes.docx", []byte("plain text pretending to be Word"), http.StatusUnsupportedMediaType, "wrong_file_type", "not an Office Open XML document"},
			{"setup.exe", []byte("MZ\x90\x00 not really a program"), http.StatusUnsupportedMediaType, "unsupported_file_type", `"setup.exe" is not a supported file type`},
			{"README", []byte("no extension at all"), http.StatusUnsupportedMediaType, "unsupported_file_type", "README"},
			{"again.md", []byte("# Baseline\n\nThe narwhal ledger lists every harbour fee.\n"), http.StatusConflict, "duplicate_content", "baseline.md"},
		}
		for _, tc := range cases {
			r := c.Upload(kbID, tc.name, tc.data)
			var body struct {
				Error struct {
					Code    string         `json:"code"`
					Message string         `json:"message"`
					Details map[string]any `json:"details"`
				} `json:"error"`
			}
			r.Decode(t, &body)
			if r.Status != tc.status || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.says) {
				t.Errorf("upload %s: %d %s, want %d %s mentioning %q", tc.name, r.Status, r.Body, tc.status, tc.code, tc.says)
			}
			if tc.status == http.StatusUnsupportedMediaType {
				if got, _ := body.Error.Details["supported"].([]any); !slices.Equal(got, supported) || !slices.Contains(got, any(".pdf")) {
					t.Errorf("upload %s: supported types %v, want %v", tc.name, got, supported)
				}
			}
		}
		// Over 100 MB, streamed: 413, and nothing is left in the store.
		r := c.UploadStream(kbID, "huge.pdf", []byte("%PDF-1.4\n"), 100<<20+1)
		if r.Status != http.StatusRequestEntityTooLarge || r.Code() != "file_too_large" || !strings.Contains(string(r.Body), "100 MB") {
			t.Errorf("oversized upload: %d %s", r.Status, r.Body)
		}
		if n := blobFiles(t, p.BlobDir, "huge.pdf"); n != 0 {
			t.Errorf("%d stored objects of the oversized upload remain", n)
		}
		// Not a multipart form.
		if r := c.Do("POST", "/api/knowledge/files/upload?kb_id="+kbID, `{"file": "x"}`); r.Status != http.StatusBadRequest || r.Code() != "invalid_multipart" {
			t.Errorf("JSON upload: %d %s", r.Status, r.Body)
		}
		baselineIntact(t, c)
	})

	t.Run("unknown ids and malformed bodies", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		other := c.OK("POST", "/api/knowledge/databases", map[string]any{"database_name": "other"})["kb_id"].(string)
		otherItem := c.UploadKB(other, "elsewhere.md", []byte("# Elsewhere\n\nA file of another knowledge base.\n"))
		cases := []struct {
			name, method, path string
			body               any
			status             int
			code               string
		}{
			{"upload to unknown kb", "UPLOAD", "kb_nope", nil, 404, "kb_not_found"},
			{"upload without kb", "UPLOAD", "", nil, 422, "missing_kb_id"},
			{"get unknown kb", "GET", "/api/knowledge/databases/kb_nope", nil, 404, "kb_not_found"},
			{"update unknown kb", "PUT", "/api/knowledge/databases/kb_nope", map[string]any{"description": "x"}, 404, "kb_not_found"},
			{"delete unknown kb", "DELETE", "/api/knowledge/databases/kb_nope", nil, 404, "kb_not_found"},
			{"query unknown kb", "POST", "/api/knowledge/databases/kb_nope/query", map[string]any{"query": "narwhal"}, 404, "kb_not_found"},
			{"documents of unknown kb", "GET", "/api/knowledge/databases/kb_nope/documents", nil, 404, "kb_not_found"},
			{"add to unknown kb", "POST", "/api/knowledge/databases/kb_nope/documents", map[string]any{"items": []string{"kb/kb_nope/upload/1-a.md"}}, 404, "kb_not_found"},
			{"unknown file", "GET", kbPath + "/documents/file_nope/basic", nil, 404, "file_not_found"},
			{"content of unknown file", "GET", kbPath + "/documents/file_nope/content", nil, 404, "file_not_found"},
			{"file of another kb", "GET", kbPath + "/documents/" + baseID + "x/basic", nil, 404, "file_not_found"},
			{"reindex unknown file", "POST", kbPath + "/documents/index", map[string]any{"file_ids": []string{"file_nope"}}, 404, "file_not_found"},
			{"create: truncated json", "POST", "/api/knowledge/databases", `{"database_name": "x", `, 400, "invalid_json"},
			{"create: empty body", "POST", "/api/knowledge/databases", ``, 400, "invalid_json"},
			{"create: wrong type", "POST", "/api/knowledge/databases", `{"database_name": 7}`, 422, "invalid_request"},
			{"create: no name", "POST", "/api/knowledge/databases", `{"description": "nameless"}`, 422, "invalid_kb"},
			{"create: bad type", "POST", "/api/knowledge/databases", map[string]any{"database_name": "x", "kb_type": "lightrag"}, 422, "unsupported_kb_type"},
			{"create: bad share", "POST", "/api/knowledge/databases", map[string]any{"database_name": "x", "share_config": map[string]any{"version": 1}}, 422, "invalid_share_config"},
			{"create: taken name", "POST", "/api/knowledge/databases", map[string]any{"database_name": "bad input"}, 409, "kb_name_taken"},
			{"add: not json", "POST", kbPath + "/documents", `items=a`, 400, "invalid_json"},
			{"add: items not a list", "POST", kbPath + "/documents", `{"items": "kb/x"}`, 422, "invalid_request"},
			{"add: no items", "POST", kbPath + "/documents", map[string]any{"items": []string{}}, 422, "invalid_items"},
			{"add: another kb's upload", "POST", kbPath + "/documents", map[string]any{"items": []string{otherItem}}, 422, "invalid_items"},
			{"add: missing upload", "POST", kbPath + "/documents", map[string]any{"items": []string{"kb/" + kbID + "/upload/1-gone.md"}}, 404, "upload_not_found"},
			{"add: bad chunking", "POST", kbPath + "/documents", map[string]any{"items": []string{otherItem}, "params": map[string]any{"chunk_parser_config": map[string]any{"chunk_token_num": "many"}}}, 422, ""},
			{"query: truncated json", "POST", kbPath + "/query", `{"query": "narwhal"`, 400, "invalid_json"},
			{"query: empty", "POST", kbPath + "/query", map[string]any{"query": "  "}, 422, "empty_query"},
			{"query: bad search_mode", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"search_mode": "fuzzy"}}, 422, "invalid_query_params"},
			{"query: top_k 0", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"final_top_k": 0}}, 422, "invalid_query_params"},
			{"query: top_k 1000", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"final_top_k": 1000}}, 422, "invalid_query_params"},
			{"query: top_k text", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"final_top_k": "ten"}}, 422, "invalid_query_params"},
			{"query: unknown option", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"top_k": 5}}, 422, "invalid_query_params"},
			{"query: threshold", "POST", kbPath + "/query", map[string]any{"query": "narwhal", "meta": map[string]any{"similarity_threshold": 2}}, 422, "invalid_query_params"},
			{"query-test: bad mode", "POST", kbPath + "/query-test", map[string]any{"query": "narwhal", "meta": map[string]any{"search_mode": "semantic"}}, 422, "invalid_query_params"},
			{"query params: bad mode", "PUT", kbPath + "/query-params", map[string]any{"options": map[string]any{"search_mode": "fuzzy"}}, 422, "invalid_query_params"},
			{"find: no patterns", "POST", "/api/knowledge/databases/external/" + kbID + "/files/" + baseID + "/find", map[string]any{"patterns": []string{}}, 422, "invalid_patterns"},
			{"open: bad window", "GET", "/api/knowledge/databases/external/" + kbID + "/files/" + baseID + "/open?limit=0", nil, 422, "invalid_window"},
		}
		for _, tc := range cases {
			var r testkit.Response
			if tc.method == "UPLOAD" {
				r = c.Upload(tc.path, "a.md", []byte("# A\n"))
			} else {
				r = c.Do(tc.method, tc.path, tc.body)
			}
			if r.Status != tc.status || (tc.code != "" && r.Code() != tc.code) || (tc.code == "" && r.Code() == "") {
				t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
			}
		}
		// The saved query params were not touched by the refused update (the
		// default of a KB on the offline embedder: keyword search).
		if v := c.OK("GET", kbPath+"/query-params", nil)["values"].(map[string]any); v["search_mode"] != "keyword" {
			t.Errorf("query params after a refused update: %v", v)
		}
		baselineIntact(t, c)
	})

	// A bucket object replaced by a damaged version: the file fails to parse,
	// but its previous chunks stay searchable and its content unchanged
	// until a version parses again.
	t.Run("corrupt replacement keeps the old chunks", func(t *testing.T) {
		t.Parallel()
		c := c.For(t)
		bucket := s3.Bucket(t, "acme-reports")
		c.BindSource(s3, kbID, "s3", "acme-reports", "reports/")
		const key = "reports/q3.pdf"
		put := func(seq string, data []byte) {
			t.Helper()
			info, err := bucket.Put(t.Context(), key, bytes.NewReader(data), int64(len(data)), "application/pdf")
			if err != nil {
				t.Fatal(err)
			}
			body := testkit.S3EventRecords(t, "ObjectCreated:Put", testkit.ObjectEvent{Bucket: "acme-reports", Key: key, Size: info.Size, ETag: info.ETag, Sequencer: seq})
			if r := c.Notify(body, "Authorization", "Bearer "+testkit.NotifyToken); r.Status != http.StatusAccepted {
				t.Fatalf("notification: %d %s", r.Status, r.Body)
			}
			testkit.WaitKnowledgeSettled(t, p.P.App.Pool, ingestWait)
		}
		file := func() map[string]any {
			t.Helper()
			for _, f := range c.KBFiles(kbID) {
				if f["source_uri"] == "s3://acme-reports/"+key {
					return f
				}
			}
			t.Fatalf("no file from %s", key)
			return nil
		}
		found := func(query, fileID string) bool {
			hits := c.Search(kbID, query, map[string]any{"search_mode": "keyword"})
			return len(hits) > 0 && hits[0]["file_id"] == fileID
		}

		put("0001", docparsetest.PDF(docparsetest.TextPage("Quarterly quokka dividends rose in the third quarter.")))
		v1 := file()
		id := v1["file_id"].(string)
		if v1["status"] != "indexed" {
			t.Fatalf("first version: %v", v1)
		}
		doc1 := c.Content(kbID, id)

		put("0002", docparsetest.CorruptPDF())
		v2 := file()
		msg, _ := v2["error_message"].(string)
		if v2["file_id"] != id || v2["status"] != "error_parsing" || !strings.Contains(msg, "could not be read as a PDF") {
			t.Fatalf("damaged version: %v", v2)
		}
		doc2 := c.Content(kbID, id)
		if !slices.Equal(doc2.ChunkIDs(), doc1.ChunkIDs()) || doc2.Content != doc1.Content {
			t.Errorf("the failed parse changed the indexed version: chunks %v → %v, content %q → %q", doc1.ChunkIDs(), doc2.ChunkIDs(), doc1.Content, doc2.Content)
		}
		if !found("quokka dividends", id) {
			t.Error("the previous version's chunks are no longer searchable after a failed re-parse")
		}

		put("0003", docparsetest.PDF(docparsetest.TextPage("Wombat surplus doubled in the fourth quarter.")))
		if v3 := file(); v3["file_id"] != id || v3["status"] != "indexed" || v3["error_message"] != nil {
			t.Fatalf("repaired version: %v", v3)
		}
		if !found("wombat surplus", id) || found("quokka dividends", id) {
			t.Error("after a good version the new text is not the one found")
		}
		if doc3 := c.Content(kbID, id); slices.Equal(doc3.ChunkIDs(), doc1.ChunkIDs()) || !strings.Contains(doc3.Content, "Wombat surplus") {
			t.Errorf("the repaired version was not indexed: %+v", doc3)
		}
		baselineIntact(t, c)
	})
}

// blobBytes sums the sizes of the files under dir of a local object store
// (0 when there is no such directory).
func blobBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// blobFiles counts the files of a local object store whose name ends with suffix.
func blobFiles(t *testing.T, dir, suffix string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, suffix) {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
