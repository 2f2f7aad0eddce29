package runstream

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// namedClient returns a client of the test server whose connections carry
// name, so that CLIENT LIST tells them apart from other tests' connections
// (a Hub's blocking reader copies its client's options, name included).
func namedClient(t testing.TB, name string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.ClientName = name
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	// Connect once before a Hub copies the options: go-redis edits them
	// during its first handshake (as redistest.New's ping does for its clients).
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitBlockedRead waits until a connection named name is blocked in XREAD:
// the state a Hub's reader is in between wake-ups.
func waitBlockedRead(t testing.TB, rdb *redis.Client, name string) {
	t.Helper()
	waitFor(t, "a blocked XREAD on "+name, 5*time.Second, func() bool {
		list, err := rdb.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			f := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			if f["name"] == name && f["cmd"] == "xread" && strings.Contains(f["flags"], "b") {
				return true
			}
		}
		return false
	})
}

// startHub runs a Hub until the test ends.
func startHub(t testing.TB, rdb *redis.Client, cfg Config) *Hub {
	t.Helper()
	h := NewHub(rdb, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hub run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("hub did not stop")
		}
	})
	return h
}

// recv reads n entries from sub or fails after timeout.
func recv(t testing.TB, sub *Subscription, n int, timeout time.Duration) []Entry {
	t.Helper()
	out := make([]Entry, 0, n)
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case e, ok := <-sub.C():
			if !ok {
				t.Fatalf("subscription closed after %d/%d entries: %v", len(out), n, sub.Err())
			}
			out = append(out, e)
		case <-deadline:
			t.Fatalf("got %d/%d entries in %s", len(out), n, timeout)
		}
	}
	return out
}

// expectQuiet asserts that sub delivers nothing for d.
func expectQuiet(t testing.TB, sub *Subscription, d time.Duration) {
	t.Helper()
	select {
	case e, ok := <-sub.C():
		if ok {
			t.Fatalf("unexpected entry %s %s", e.ID, e.Event)
		}
	case <-time.After(d):
	}
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ids(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func appendN(t testing.TB, w *Writer, runID string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range n {
		id, err := w.Append(context.Background(), runID, "th", EventCustom, map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = id
	}
	return out
}

// sseEvent is one parsed SSE frame: an event or a comment.
type sseEvent struct {
	Event, Data, ID string
	HasID           bool
	Comment         string
}

// sseConn is a test SSE client over httptest.
type sseConn struct {
	resp   *http.Response
	events chan sseEvent
	done   chan error // receives once, when the body ends
	cancel context.CancelFunc
}

func dialSSE(t testing.TB, srv *httptest.Server, path string, header http.Header) *sseConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &sseConn{resp: resp, events: make(chan sseEvent, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var cur sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.Comment != "" || cur.Event != "" || data != nil {
					cur.Data = strings.Join(data, "\n")
					c.events <- cur
				}
				cur, data = sseEvent{}, nil
			case strings.HasPrefix(line, ": "):
				cur.Comment = line[2:]
			case strings.HasPrefix(line, "event: "):
				cur.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[len("data: "):])
			case strings.HasPrefix(line, "id: "):
				cur.ID, cur.HasID = line[len("id: "):], true
			}
		}
		err := sc.Err()
		if err == nil {
			err = errors.New("EOF")
		}
		c.done <- err
		close(c.events)
	}()
	t.Cleanup(cancel)
	return c
}

// next returns the next event, skipping heartbeats unless wantComments.
func (c *sseConn) next(t testing.TB, timeout time.Duration) (sseEvent, bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return sseEvent{}, false
			}
			if ev.Comment != "" {
				continue
			}
			return ev, true
		case <-deadline:
			t.Fatalf("no SSE event in %s", timeout)
		}
	}
}

// rest collects events until the server closes the response.
func (c *sseConn) rest(t testing.TB, timeout time.Duration) []sseEvent {
	t.Helper()
	var out []sseEvent
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return out
			}
			if ev.Comment == "" {
				out = append(out, ev)
			}
		case <-deadline:
			t.Fatalf("response not closed in %s (got %d events)", timeout, len(out))
		}
	}
}
