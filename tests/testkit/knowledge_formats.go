package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// Knowledge-base helpers for the ingestion, bad-input and access tests:
// users of each role, the upload → add → status steps one at a time, a
// streamed oversized upload, a document's content and chunks, and a
// watcher of a KB's status notices (GET …/{kb_id}/events).

// For returns a copy of c that reports to t (a subtest running in its own
// goroutine must not fail its parent).
func (c *Client) For(t testing.TB) *Client {
	cp := *c
	cp.T = t
	return &cp
}

// CreateUser creates a user with role ("user" or "admin"; only a superadmin
// creates admins), in department dept when it is not nil, and logs in as it.
func (c *Client) CreateUser(uid, role string, dept *int64) *Client {
	c.T.Helper()
	body := map[string]any{"uid": uid, "username": uid, "password": "password-" + uid, "role": role}
	if dept != nil {
		body["department_id"] = *dept
	}
	c.OK("POST", "/api/auth/users", body)
	return c.As("").Login(uid, "password-"+uid)
}

// UploadKB uploads one file to a KB and returns its file_path (the item to
// add); the upload must succeed.
func (c *Client) UploadKB(kbID, name string, data []byte) string {
	c.T.Helper()
	r := c.Upload(kbID, name, data)
	if r.Status != http.StatusOK {
		c.T.Fatalf("upload %s: %d %s", name, r.Status, r.Body)
	}
	return r.JSON()["file_path"].(string)
}

// AddDocuments registers uploaded items with POST …/documents (parse and,
// unless params say auto_index false, index) and returns their file ids in
// item order.
func (c *Client) AddDocuments(kbID string, items []string, params map[string]any) []string {
	c.T.Helper()
	if params == nil {
		params = map[string]any{}
	}
	added := c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": params})
	list, _ := added["items"].([]any)
	if len(list) != len(items) {
		c.T.Fatalf("added %d of %d items: %v", len(list), len(items), added)
	}
	ids := make([]string, len(list))
	for i, it := range list {
		ids[i] = it.(map[string]any)["file_id"].(string)
	}
	return ids
}

// FileMeta is GET …/documents/{id}/basic's meta.
func (c *Client) FileMeta(kbID, fileID string) map[string]any {
	c.T.Helper()
	return c.OK("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID+"/basic", nil)["meta"].(map[string]any)
}

// WaitFile polls a file's status until it is one of statuses and returns
// its meta; it fails when the file settles elsewhere (a final status not
// asked for) or the timeout passes.
func (c *Client) WaitFile(kbID, fileID string, timeout time.Duration, statuses ...string) map[string]any {
	c.T.Helper()
	final := []string{"indexed", "error_parsing", "error_indexing"}
	deadline := time.Now().Add(timeout)
	for {
		meta := c.FileMeta(kbID, fileID)
		st, _ := meta["status"].(string)
		if slices.Contains(statuses, st) {
			return meta
		}
		if slices.Contains(final, st) {
			c.T.Fatalf("file %s (%v) is %s, want %v; error: %v", fileID, meta["filename"], st, statuses, meta["error_message"])
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("file %s (%v) still %s after %s, want %v", fileID, meta["filename"], st, timeout, statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// DocChunk is a chunk as GET …/documents/{id}/content lists it.
type DocChunk struct {
	ChunkID    string `json:"chunk_id"`
	ChunkIndex int    `json:"chunk_index"`
	Content    string `json:"content"`
}

// DocContent is GET …/documents/{id}/content: the parsed Markdown and the
// file's chunks.
type DocContent struct {
	Content string     `json:"content"`
	Lines   []string   `json:"lines"`
	Chunks  []DocChunk `json:"chunks"`
}

// ChunkIDs lists the chunk ids in order.
func (d DocContent) ChunkIDs() []string {
	ids := make([]string, len(d.Chunks))
	for i, ch := range d.Chunks {
		ids[i] = ch.ChunkID
	}
	return ids
}

// Content reads a file's parsed Markdown and chunks.
func (c *Client) Content(kbID, fileID string) DocContent {
	c.T.Helper()
	r := c.Do("GET", "/api/knowledge/databases/"+kbID+"/documents/"+fileID+"/content", nil)
	if r.Status != http.StatusOK {
		c.T.Fatalf("content of %s: %d %s", fileID, r.Status, r.Body)
	}
	var d DocContent
	r.Decode(c.T, &d)
	return d
}

// UploadStream uploads a file of size bytes — head followed by filler —
// generated while it is sent, so an oversized upload needs no memory. It
// returns the answer, which may come before the whole body was sent.
func (c *Client) UploadStream(kbID, filename string, head []byte, size int64) Response {
	c.T.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = fw.Write(head)
		}
		filler := make([]byte, 256<<10)
		for left := size - int64(len(head)); err == nil && left > 0; left -= int64(len(filler)) {
			_, err = fw.Write(filler[:min(int64(len(filler)), left)])
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequest("POST", c.Base+"/api/knowledge/files/upload?kb_id="+url.QueryEscape(kbID), pr)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatalf("streamed upload of %s: %v", filename, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_ = pr.CloseWithError(io.ErrClosedPipe) // stop the writer if the server answered early
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// Notice is a file status notice of a KB's event stream.
type Notice struct {
	ID           string `json:"-"`
	FileID       string `json:"file_id"`
	Filename     string `json:"filename"`
	Status       string `json:"status"`
	ErrorMessage string `json:"error_message"`
}

// KBWatch reads a KB's event stream (from its start) in the background.
type KBWatch struct {
	done    chan struct{} // closed when the stream ends
	mu      sync.Mutex
	notices []Notice
	changed chan struct{} // closed and replaced on every notice
	err     error
}

// WatchKB follows GET /api/knowledge/databases/{kb_id}/events as c until t
// ends. It reads from the start of the stream (after_seq=0-0), so no notice
// is missed however late the connection is made.
func WatchKB(t testing.TB, c *Client, kbID string) *KBWatch {
	t.Helper()
	w := &KBWatch{done: make(chan struct{}), changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer close(w.done)
		_, err := c.Stream(ctx, "/api/knowledge/databases/"+kbID+"/events?after_seq=0-0", "", func(e Event) bool {
			var n Notice
			if e.Event != "file_status" || json.Unmarshal(e.Data, &n) != nil {
				return true
			}
			n.ID = e.ID
			w.mu.Lock()
			w.notices = append(w.notices, n)
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			return true
		})
		w.mu.Lock()
		if err == nil && ctx.Err() == nil {
			err = fmt.Errorf("the event stream of %s ended", kbID)
		}
		w.err = err
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}()
	return w
}

// Done is closed when the stream ends (the server closed it, or t ended).
func (w *KBWatch) Done() <-chan struct{} { return w.done }

// Statuses lists the statuses noticed for a file, in order.
func (w *KBWatch) Statuses(fileID string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range w.notices {
		if n.FileID == fileID {
			out = append(out, n.Status)
		}
	}
	return out
}

// Wait waits until the file has had count notices of status and returns
// the last of them; t is the (sub)test that waits.
func (w *KBWatch) Wait(t testing.TB, fileID, status string, count int, timeout time.Duration) Notice {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		var seen []Notice
		for _, n := range w.notices {
			if n.FileID == fileID && n.Status == status {
				seen = append(seen, n)
			}
		}
		ch, err := w.changed, w.err
		w.mu.Unlock()
		if len(seen) >= count {
			return seen[count-1]
		}
		if err != nil {
			t.Fatalf("waiting for %s notice %d of %s: %v", status, count, fileID, err)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s notice %d for %s within %s; noticed %v", status, count, fileID, timeout, w.Statuses(fileID))
		}
	}
}

// Search runs POST …/{kb_id}/query with the query and retrieval options
// (meta) and returns the hits; the query must succeed.
func (c *Client) Search(kbID, query string, meta map[string]any) []map[string]any {
	c.T.Helper()
	r := c.Do("POST", "/api/knowledge/databases/"+kbID+"/query", map[string]any{"query": query, "meta": meta})
	if r.Status != http.StatusOK {
		c.T.Fatalf("query %q in %s: %d %s", query, kbID, r.Status, r.Body)
	}
	var out struct {
		Result []map[string]any `json:"result"`
		Status string           `json:"status"`
	}
	r.Decode(c.T, &out)
	if out.Status != "success" {
		c.T.Fatalf("query %q in %s: status %q: %s", query, kbID, out.Status, r.Body)
	}
	return out.Result
}
