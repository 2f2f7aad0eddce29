package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

// TryDo is Do for a server that may die while answering: a dropped
// connection is returned as an error instead of failing the test.
func (c *Client) TryDo(method, path string, body any) (Response, error) {
	var rdr io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return Response{}, err
		}
		rdr = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.Base+path, rdr)
	if err != nil {
		return Response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}, nil
}

// NewKnowledgeBase creates a knowledge base as c (an admin) and returns its
// kb_id. share is its share_config (nil: the server's default).
func (c *Client) NewKnowledgeBase(name, description string, share map[string]any) string {
	c.T.Helper()
	body := map[string]any{"database_name": name, "description": description}
	if share != nil {
		body["share_config"] = share
	}
	id, _ := c.OK("POST", "/api/knowledge/databases", body)["kb_id"].(string)
	if id == "" {
		c.T.Fatalf("create knowledge base %s: no kb_id", name)
	}
	return id
}

// GlobalReadShare is a share_config letting every user read a KB.
func GlobalReadShare() map[string]any {
	return map[string]any{"version": 2, "read_scope": map[string]any{"access_level": "global"}}
}

// UploadAll uploads files to a KB and returns the upload keys (the items of
// POST …/documents), sorted by file name.
func (c *Client) UploadAll(kbID string, files map[string][]byte) []string {
	c.T.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	items := make([]string, 0, len(files))
	for _, n := range names {
		r := c.Upload(kbID, n, files[n])
		if r.Status != http.StatusOK {
			c.T.Fatalf("upload %s: %d %s", n, r.Status, r.Body)
		}
		items = append(items, r.JSON()["file_path"].(string))
	}
	return items
}

// KBFileStatuses returns file_id → status of a KB's files (not folders).
func KBFileStatuses(t testing.TB, pool *pgxpool.Pool, kbID string) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT file_id, status FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder`, kbID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// WaitKBFilesIndexed polls until kbID has n files, all indexed, and returns
// their ids. A file in an error status fails at once; so does a timeout,
// with the statuses it saw.
func WaitKBFilesIndexed(t testing.TB, pool *pgxpool.Pool, kbID string, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := KBFileStatuses(t, pool, kbID)
		indexed := 0
		for id, s := range st {
			if s == "error_parsing" || s == "error_indexing" {
				var msg *string
				_ = pool.QueryRow(context.Background(), `SELECT error_message FROM knowledge_files WHERE file_id = $1`, id).Scan(&msg)
				t.Fatalf("file %s ended in %s: %v", id, s, kbErrorText(msg))
			}
			if s == "indexed" {
				indexed++
			}
		}
		if len(st) == n && indexed == n {
			ids := make([]string, 0, n)
			for id := range st {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("knowledge base %s: want %d indexed files after %s, have %v", kbID, n, timeout, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kbErrorText(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// FileIndexProblems checks that an indexed file has exactly one set of
// chunks and that the keyword index and the vector store hold exactly that
// set: chunk_count matches the chunk rows, chunk positions are not repeated,
// and the file's vectors and keyword documents are its chunk ids, no more,
// no less. It returns what is wrong ("" entries never).
func FileIndexProblems(t testing.TB, pool *pgxpool.Pool, kbID, fileID string) []string {
	t.Helper()
	ctx := context.Background()
	var problems []string
	var status string
	var chunkCount int
	if err := pool.QueryRow(ctx, `SELECT status, chunk_count FROM knowledge_files WHERE file_id = $1`, fileID).Scan(&status, &chunkCount); err != nil {
		t.Fatalf("file %s: %v", fileID, err)
	}
	if status != "indexed" {
		problems = append(problems, fmt.Sprintf("status %s, want indexed", status))
	}
	chunks := kbQueryStrings(t, pool, `SELECT chunk_id FROM knowledge_chunks WHERE file_id = $1 ORDER BY chunk_id`, fileID)
	if len(chunks) == 0 {
		problems = append(problems, "no chunks")
	}
	if len(chunks) != chunkCount {
		problems = append(problems, fmt.Sprintf("chunk_count %d but %d chunk rows", chunkCount, len(chunks)))
	}
	var positions, distinctPositions, contents, distinctContents int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT chunk_index), count(content), count(DISTINCT content)
		FROM knowledge_chunks WHERE file_id = $1`, fileID).Scan(&positions, &distinctPositions, &contents, &distinctContents); err != nil {
		t.Fatal(err)
	}
	if positions != distinctPositions {
		problems = append(problems, fmt.Sprintf("%d chunks share %d positions (two chunk sets?)", positions, distinctPositions))
	}
	if contents != distinctContents {
		problems = append(problems, fmt.Sprintf("%d chunks but %d distinct contents (duplicated chunks)", contents, distinctContents))
	}
	vectors := kbQueryStrings(t, pool, `SELECT id FROM vector_items WHERE collection = $1 AND grp = $2 ORDER BY id`, kbID, fileID)
	if !slices.Equal(vectors, chunks) {
		problems = append(problems, fmt.Sprintf("%d vectors for %d chunks (extra %v, missing %v)", len(vectors), len(chunks),
			kbMissingFrom(vectors, chunks), kbMissingFrom(chunks, vectors)))
	}
	docs := kbQueryStrings(t, pool, `SELECT d.doc_id FROM keyword_docs d JOIN keyword_indexes i ON i.index_no = d.index_no
		WHERE i.index_id = $1 AND starts_with(d.doc_id, $2 || '_') ORDER BY d.doc_id`, kbID, fileID)
	if !slices.Equal(docs, chunks) {
		problems = append(problems, fmt.Sprintf("%d keyword documents for %d chunks (extra %v, missing %v)", len(docs), len(chunks),
			kbMissingFrom(docs, chunks), kbMissingFrom(chunks, docs)))
	}
	return problems
}

// KBIndexProblems checks a KB's index as a whole: no file left between
// stages, the keyword index's statistics match its rows, no posting without
// its document, no keyword document or vector without its chunk, no vector
// deletion still owed, and no event failed permanently (the database is
// the test's own).
func KBIndexProblems(t testing.TB, pool *pgxpool.Pool, kbID string) []string {
	t.Helper()
	ctx := context.Background()
	var problems []string
	checks := []struct {
		what string
		sql  string
	}{
		{"files between stages", `SELECT count(*) FROM knowledge_files WHERE kb_id = $1 AND status IN ('uploaded', 'parsing', 'parsed', 'indexing')`},
		{"keyword n_docs mismatch", `SELECT count(*) FROM keyword_indexes i WHERE i.index_id = $1
			AND i.n_docs <> (SELECT count(*) FROM keyword_docs d WHERE d.index_no = i.index_no)`},
		{"keyword total_len mismatch", `SELECT count(*) FROM keyword_indexes i WHERE i.index_id = $1
			AND i.total_len <> (SELECT coalesce(sum(length), 0) FROM keyword_docs d WHERE d.index_no = i.index_no)`},
		{"keyword n_postings mismatch", `SELECT count(*) FROM keyword_indexes i WHERE i.index_id = $1
			AND i.n_postings <> (SELECT coalesce(sum(cardinality(p.docs)), 0) FROM keyword_blocks p WHERE p.index_no = i.index_no)`},
		{"postings without their document", `SELECT count(*) FROM keyword_blocks p JOIN keyword_indexes i ON i.index_no = p.index_no CROSS JOIN LATERAL unnest(p.docs) AS x(doc_no)
			WHERE i.index_id = $1 AND NOT EXISTS (SELECT 1 FROM keyword_docs d WHERE d.index_no = p.index_no AND d.doc_no = x.doc_no)`},
		{"keyword documents without their chunk", `SELECT count(*) FROM keyword_docs d JOIN keyword_indexes i ON i.index_no = d.index_no
			WHERE i.index_id = $1 AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c WHERE c.chunk_id = d.doc_id)`},
		{"vectors without their chunk", `SELECT count(*) FROM vector_items v WHERE v.collection = $1
			AND NOT EXISTS (SELECT 1 FROM knowledge_chunks c WHERE c.chunk_id = v.id)`},
		{"vector deletions owed", `SELECT count(*) FROM knowledge_vector_deletes WHERE kb_id = $1`},
	}
	for _, c := range checks {
		var n int
		if err := pool.QueryRow(ctx, c.sql, kbID).Scan(&n); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if n != 0 {
			problems = append(problems, fmt.Sprintf("%s: %d", c.what, n))
		}
	}
	// The test's database is its own: every failure recorded is this KB's.
	var failures int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_failures`).Scan(&failures); err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		problems = append(problems, fmt.Sprintf("events failed permanently: %d", failures))
	}
	return problems
}

// WaitKBIndexClean polls KBIndexProblems until it reports nothing (owed
// vector deletions are applied by the sweep, a moment after a commit).
func WaitKBIndexClean(t testing.TB, pool *pgxpool.Pool, kbID string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := KBIndexProblems(t, pool, kbID)
		if len(p) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("knowledge base %s index after %s: %s", kbID, timeout, strings.Join(p, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kbQueryStrings(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// FileChunkIDs lists a file's chunk ids, sorted.
func FileChunkIDs(t testing.TB, pool *pgxpool.Pool, fileID string) []string {
	t.Helper()
	return kbQueryStrings(t, pool, `SELECT chunk_id FROM knowledge_chunks WHERE file_id = $1 ORDER BY chunk_id`, fileID)
}

func kbMissingFrom(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
			if len(out) == 5 {
				return append(out, "…")
			}
		}
	}
	return out
}

// ToolMessages returns tool_call_id → content of the tool results in a
// model request (what the model reads back).
func ToolMessages(req llmtest.ChatRequest) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// ToolEvent is a tool lifecycle event of a run stream (yuxi.stream_event,
// method "tools"): tool-finished carries the output or the error.
type ToolEvent struct {
	Kind       string // tool-finished, …
	ToolCallID string
	ToolName   string
	Output     string
	Error      string
}

// ToolEvents extracts the tool lifecycle events of a run stream.
func ToolEvents(events []Event) []ToolEvent {
	var out []ToolEvent
	for _, e := range events {
		if e.Event != "custom" {
			continue
		}
		p := e.Payload()
		if p["name"] != "yuxi.stream_event" {
			continue
		}
		chunk, _ := p["chunk"].(map[string]any)
		ev, _ := chunk["event"].(map[string]any)
		if ev == nil || ev["method"] != "tools" {
			continue
		}
		d, _ := ev["data"].(map[string]any)
		te := ToolEvent{}
		te.Kind, _ = d["event"].(string)
		te.ToolCallID, _ = d["tool_call_id"].(string)
		te.ToolName, _ = d["tool_name"].(string)
		te.Output = toolEventText(d["output"])
		te.Error = toolEventText(d["error"])
		out = append(out, te)
	}
	return out
}

// StreamedToolCalls returns the tool calls a run stream announced
// (stream_event type tool_call): tool_call_id → tool name.
func StreamedToolCalls(events []Event) map[string]string {
	out := map[string]string{}
	for _, e := range events {
		if e.Event != "messages" {
			continue
		}
		items, _ := e.Payload()["items"].([]any)
		for _, it := range items {
			chunk, _ := it.(map[string]any)
			se, _ := chunk["stream_event"].(map[string]any)
			if se == nil || se["type"] != "tool_call" {
				continue
			}
			id, _ := se["tool_call_id"].(string)
			name, _ := se["name"].(string)
			out[id] = name
		}
	}
	return out
}

func toolEventText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
