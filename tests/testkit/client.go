// Package testkit drives the platform from the outside, as a user would: an
// HTTP API client with JSON helpers, an SSE reader that renders run streams
// the way a client must (attempt-scoped messages, retry markers, exactly one
// end), and starters for the platform in-process or as processes.
//
// Imported by: tests/* and benchmarks. May import: anything.
package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Client calls the API with a bearer token.
type Client struct {
	T     testing.TB
	Base  string
	Token string
	HTTP  *http.Client
}

// Response is a decoded API response.
type Response struct {
	Status int
	Body   []byte
	Header http.Header
}

// JSON decodes the body into a map.
func (r Response) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Code is the machine-readable error code of an error response.
func (r Response) Code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Decode decodes the body into v.
func (r Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Do sends a request with an optional JSON body (string bodies are sent raw).
func (c *Client) Do(method, path string, body any) Response {
	c.T.Helper()
	var rdr io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rdr, ct = strings.NewReader(b), "application/json"
	case []byte:
		rdr, ct = bytes.NewReader(b), "application/json"
	case url.Values:
		rdr, ct = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.T.Fatal(err)
		}
		rdr, ct = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequest(method, c.Base+path, rdr)
	if err != nil {
		c.T.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// OK sends a request and fails the test unless it answers 200; it returns the decoded map.
func (c *Client) OK(method, path string, body any) map[string]any {
	c.T.Helper()
	r := c.Do(method, path, body)
	if r.Status != http.StatusOK {
		c.T.Fatalf("%s %s: status %d: %s", method, path, r.Status, r.Body)
	}
	return r.JSON()
}

// As returns a client for another token.
func (c *Client) As(token string) *Client {
	cp := *c
	cp.Token = token
	return &cp
}

// Login initializes the first admin when needed and logs in.
func (c *Client) Login(uid, password string) *Client {
	c.T.Helper()
	r := c.Do("GET", "/api/auth/check-first-run", nil)
	if first, _ := r.JSON()["first_run"].(bool); first {
		c.Do("POST", "/api/auth/initialize", map[string]string{"uid": uid, "password": password})
	}
	resp := c.Do("POST", "/api/auth/token", url.Values{"username": {uid}, "password": {password}})
	if resp.Status != http.StatusOK {
		c.T.Fatalf("login %s: %d %s", uid, resp.Status, resp.Body)
	}
	return c.As(resp.JSON()["access_token"].(string))
}

// NewUser creates a plain user (the client must be an admin) and logs in as it.
func (c *Client) NewUser(uid string) *Client {
	c.T.Helper()
	c.OK("POST", "/api/auth/users", map[string]any{"uid": uid, "username": uid, "password": "password-" + uid, "role": "user"})
	anon := c.As("")
	return anon.Login(uid, "password-"+uid)
}

// Thread creates a thread with the default agent and returns its id.
func (c *Client) Thread() string {
	c.T.Helper()
	return c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "test"})["id"].(string)
}

// Submit posts a message and returns the intake response.
func (c *Client) Submit(threadID, query string, extra map[string]any) map[string]any {
	c.T.Helper()
	body := map[string]any{"query": query, "agent_slug": "default-chatbot", "thread_id": threadID}
	for k, v := range extra {
		body[k] = v
	}
	return c.OK("POST", "/api/agent/runs", body)
}

// Event is one server-sent event.
type Event struct {
	ID    string
	Event string
	Data  json.RawMessage
}

// Payload returns the envelope's payload.
func (e Event) Payload() map[string]any {
	var env struct {
		Payload map[string]any `json:"payload"`
	}
	_ = json.Unmarshal(e.Data, &env)
	return env.Payload
}

// Stream reads an SSE response until it ends or ctx is done. lastID, when
// set, is sent as Last-Event-ID. onEvent may stop early by returning false.
func (c *Client) Stream(ctx context.Context, path, lastID string, onEvent func(Event) bool) (comments int, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.Base+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("stream %s: status %d: %s", path, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Event != "" || len(data) > 0 {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if !onEvent(ev) {
					return comments, nil
				}
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "event:"):
			ev.Event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return comments, err
	}
	return comments, nil
}

// Collect reads a run's whole stream (until end) within timeout.
func (c *Client) Collect(runID string, timeout time.Duration) []Event {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []Event
	_, err := c.Stream(ctx, "/api/agent/runs/"+runID+"/events", "", func(e Event) bool {
		out = append(out, e)
		return true
	})
	if err != nil {
		c.T.Fatalf("stream run %s: %v", runID, err)
	}
	if len(out) == 0 || out[len(out)-1].Event != "end" {
		c.T.Fatalf("stream of run %s did not end within %s (%d events)", runID, timeout, len(out))
	}
	return out
}

// WaitDispatched polls a request until it started a run and returns the run id.
func (c *Client) WaitDispatched(requestID string, timeout time.Duration) string {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		req := c.OK("GET", "/api/agent/requests/"+requestID, nil)["request"].(map[string]any)
		if id, ok := req["dispatched_run_id"].(string); ok && id != "" {
			return id
		}
		if time.Now().After(deadline) {
			c.T.Fatalf("request %s not dispatched after %s: %v", requestID, timeout, req)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitStatus polls a run until it has status.
func (c *Client) WaitStatus(runID, status string, timeout time.Duration) {
	c.T.Helper()
	deadline := time.Now().Add(timeout)
	for c.OK("GET", "/api/agent/runs/"+runID, nil)["run"].(map[string]any)["status"] != status {
		if time.Now().After(deadline) {
			c.T.Fatalf("run %s not %s after %s", runID, status, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Upload posts a file to a KB (multipart field "file") and returns the answer.
func (c *Client) Upload(kbID, filename string, data []byte) Response {
	c.T.Helper()
	return c.PostFile("/api/knowledge/files/upload?kb_id="+url.QueryEscape(kbID), filename, data)
}

// PostFile posts a multipart form with one file (field "file") to path.
func (c *Client) PostFile(path, filename string, data []byte) Response {
	c.T.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", filename)
	if err != nil {
		c.T.Fatal(err)
	}
	_, _ = fw.Write(data)
	_ = mw.Close()
	req, err := http.NewRequest("POST", c.Base+path, &buf)
	if err != nil {
		c.T.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.http().Do(req)
	if err != nil {
		c.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Body: b, Header: resp.Header}
}

// Ingest uploads files to a KB, adds them and waits until every one reaches a
// settled status; it returns file_id → file (the /basic meta).
func (c *Client) Ingest(kbID string, files map[string][]byte, timeout time.Duration) map[string]map[string]any {
	c.T.Helper()
	var items []string
	names := map[string]string{}
	for name, data := range files {
		r := c.Upload(kbID, name, data)
		if r.Status != http.StatusOK {
			c.T.Fatalf("upload %s: %d %s", name, r.Status, r.Body)
		}
		key := r.JSON()["file_path"].(string)
		items = append(items, key)
		names[key] = name
	}
	added := c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents", map[string]any{"items": items, "params": map[string]any{}})
	out := map[string]map[string]any{}
	deadline := time.Now().Add(timeout)
	for _, it := range added["items"].([]any) {
		id := it.(map[string]any)["file_id"].(string)
		for {
			meta := c.OK("GET", "/api/knowledge/databases/"+kbID+"/documents/"+id+"/basic", nil)["meta"].(map[string]any)
			st := meta["status"].(string)
			if st == "indexed" || st == "error_parsing" || st == "error_indexing" {
				out[id] = meta
				break
			}
			if time.Now().After(deadline) {
				c.T.Fatalf("file %s (%s) still %s after %s", id, meta["filename"], st, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}
