package runstream

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// runServer serves ServeRun with opts (RunID from ?run=).
func runServer(t *testing.T, hub *Hub, opts RunStreamOptions) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := opts
		o.RunID = r.URL.Query().Get("run")
		o.Verbose = r.URL.Query().Get("verbose") != "false"
		ServeRun(w, r, hub, o)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func eventIDs(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestRunSSEResumesAfterLastEventIDWhichWinsOverAfterSeq(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{})
	id := appendN(t, w, "r", 5)

	c := dialSSE(t, srv, "/?run=r&after_seq="+id[0], http.Header{"Last-Event-Id": {id[2]}})
	if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if c.resp.Header.Get("Cache-Control") != "no-cache" || c.resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", c.resp.Header)
	}
	for _, want := range id[3:] {
		ev, _ := c.next(t, 5*time.Second)
		if ev.ID != want || ev.Event != EventCustom {
			t.Fatalf("got %+v, want id %s", ev, want)
		}
		var env Envelope
		if err := json.Unmarshal([]byte(ev.Data), &env); err != nil || env.RunID != "r" || env.Event != EventCustom {
			t.Fatalf("data is not the envelope: %s", ev.Data)
		}
	}
	// Live, then the end closes the response.
	live, _ := w.Append(context.Background(), "r", "th", EventMessages, map[string]any{"items": []int{1}})
	end, _ := w.Append(context.Background(), "r", "th", EventEnd, map[string]string{"status": "completed"})
	_, _ = w.Append(context.Background(), "r", "th", EventCustom, nil) // after end: never sent
	rest := c.rest(t, 5*time.Second)
	if len(rest) != 2 || rest[0].ID != live || rest[1].ID != end || rest[1].Event != EventEnd {
		t.Fatalf("tail %+v, want %s then end %s", eventIDs(rest), live, end)
	}
}

func TestRunSSEResumesWithAfterSeqAndInvalidCursorMeansStart(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{Terminal: true, Status: "completed"})
	id := appendN(t, w, "r", 3)
	endID, _ := w.Append(context.Background(), "r", "", EventEnd, map[string]string{"status": "completed"})

	got := eventIDs(dialSSE(t, srv, "/?run=r&after_seq="+id[1], nil).rest(t, 5*time.Second))
	if want := []string{id[2], endID}; !slices.Equal(got, want) {
		t.Fatalf("after_seq=%s: %v, want %v", id[1], got, want)
	}
	got = eventIDs(dialSSE(t, srv, "/?run=r&after_seq=bogus", http.Header{"Last-Event-Id": {"not-an-id"}}).rest(t, 5*time.Second))
	if want := []string{id[0], id[1], id[2], endID}; !slices.Equal(got, want) {
		t.Fatalf("invalid cursors: %v, want everything %v", got, want)
	}
}

func TestRunSSESyntheticEndForTerminalRunWithoutEnd(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{ThreadID: "th", RequestID: "req-1", Terminal: true, Status: "failed"})
	id := appendN(t, w, "r", 2)

	evs := dialSSE(t, srv, "/?run=r", nil).rest(t, 5*time.Second)
	if len(evs) != 3 || evs[0].ID != id[0] || evs[1].ID != id[1] {
		t.Fatalf("events %+v", evs)
	}
	end := evs[2]
	// Its id is above every id the client saw, or a client dropping what it
	// has already seen would drop the end too.
	if want := bumped(t, id[1]); end.Event != EventEnd || end.ID != want {
		t.Fatalf("synthetic end %+v, want id %s (just after the last seen)", end, want)
	}
	var env Envelope
	if err := json.Unmarshal([]byte(end.Data), &env); err != nil {
		t.Fatal(err)
	}
	if env.RunID != "r" || env.ThreadID != "th" || env.Event != EventEnd || string(env.Payload) != `{"request_id":"req-1","status":"failed"}` {
		t.Fatalf("synthetic end envelope %s", end.Data)
	}

	// Nothing after the cursor: the end's id is just after the cursor.
	evs = dialSSE(t, srv, "/?run=r", http.Header{"Last-Event-Id": {id[1]}}).rest(t, 5*time.Second)
	if len(evs) != 1 || evs[0].Event != EventEnd || evs[0].ID != bumped(t, id[1]) {
		t.Fatalf("terminal, nothing new: %+v", evs)
	}
	// Resuming from the synthetic end's id gets the real end once it is written.
	realEnd, err := w.Append(context.Background(), "r", "th", EventEnd, map[string]string{"status": "failed"})
	if err != nil {
		t.Fatal(err)
	}
	evs = dialSSE(t, srv, "/?run=r", http.Header{"Last-Event-Id": {bumped(t, id[1])}}).rest(t, 5*time.Second)
	if len(evs) != 1 || evs[0].ID != realEnd {
		t.Fatalf("resumed after the synthetic end: %+v, want the real end %s", evs, realEnd)
	}
	// No stream at all.
	evs = dialSSE(t, srv, "/?run=gone", nil).rest(t, 5*time.Second)
	if len(evs) != 1 || evs[0].Event != EventEnd || evs[0].ID != "0-1" {
		t.Fatalf("terminal, expired stream: %+v", evs)
	}
}

func TestRunSSESendsExactlyOneEnd(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	ctx := context.Background()
	_, _ = w.Append(ctx, "r", "", EventMessages, nil)
	endID, _, _ := w.AppendOnce(ctx, "r", "", "end", EventEnd, map[string]string{"status": "completed"})
	_, _, _ = w.AppendOnce(ctx, "r", "", "end", EventEnd, map[string]string{"status": "completed"})
	_, _ = w.Append(ctx, "r", "", EventEnd, map[string]string{"status": "stray"})

	for _, terminal := range []bool{true, false} {
		srv := runServer(t, hub, RunStreamOptions{Terminal: terminal, Status: "completed"})
		evs := dialSSE(t, srv, "/?run=r", nil).rest(t, 5*time.Second)
		ends := 0
		for _, e := range evs {
			if e.Event == EventEnd {
				ends++
				if e.ID != endID {
					t.Errorf("terminal=%v: end id %s, want the stream's %s", terminal, e.ID, endID)
				}
			}
		}
		if ends != 1 || evs[len(evs)-1].Event != EventEnd {
			t.Fatalf("terminal=%v: %d ends in %+v", terminal, ends, evs)
		}
	}
}

func TestRunSSEHeartbeatWhileIdle(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{Heartbeat: 20 * time.Millisecond})
	c := dialSSE(t, srv, "/?run=r", nil)
	beats := 0
	deadline := time.After(5 * time.Second)
	for beats < 2 {
		select {
		case ev := <-c.events:
			if ev.Comment != "heartbeat" {
				t.Fatalf("unexpected %+v", ev)
			}
			beats++
		case <-deadline:
			t.Fatalf("%d heartbeats", beats)
		}
	}
}

func TestRunSSEClientDisconnectReleasesSubscription(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{})
	c := dialSSE(t, srv, "/?run=r", nil)
	waitFor(t, "stream followed", 5*time.Second, func() bool { return hub.Stats().Streams == 1 })
	id, _ := w.Append(context.Background(), "r", "", EventCustom, nil)
	if ev, _ := c.next(t, 5*time.Second); ev.ID != id {
		t.Fatalf("got %+v", ev)
	}

	c.cancel()
	waitFor(t, "subscription released", 5*time.Second, func() bool {
		st := hub.Stats()
		return st.Subscriptions == 0 && st.Streams == 0
	})
}

func TestRunSSECompactEnvelopeWhenNotVerbose(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{Terminal: true, Status: "completed", RequestID: "req-9", ThreadID: "th"})
	ctx := context.Background()
	msgID, _ := w.Append(ctx, "r", "th", EventMessages, map[string]any{"items": []any{map[string]any{
		"request_id": "req-9", "response": "hi", "thread_id": "th", "status": "loading",
		"stream_event": map[string]any{"type": "message_delta", "message_id": "m1", "content": "hi", "thread_id": "th", "namespace": "x"},
		"metadata":     map[string]any{"langgraph_node": "model"},
	}}})

	evs := dialSSE(t, srv, "/?run=r&verbose=false", nil).rest(t, 5*time.Second)
	if len(evs) != 2 || evs[0].ID != msgID || evs[1].Event != EventEnd {
		t.Fatalf("events %+v", evs)
	}
	want := `{"payload":{"items":[{"status":"loading","stream_event":{"content":"hi","message_id":"m1","type":"message_delta"}}]},"request_id":"req-9","run_id":"r","schema_version":1,"thread_id":"th"}`
	if evs[0].Data != want {
		t.Fatalf("compact messages:\n%s\nwant\n%s", evs[0].Data, want)
	}
	if want := `{"payload":{"status":"completed"},"request_id":"req-9","run_id":"r","schema_version":1,"thread_id":"th"}`; evs[1].Data != want {
		t.Fatalf("compact synthetic end:\n%s\nwant\n%s", evs[1].Data, want)
	}
}

// bumped is the id right after stream id s.
func bumped(t *testing.T, s string) string {
	t.Helper()
	id, ok := parseID(s)
	if !ok {
		t.Fatalf("not a stream id: %q", s)
	}
	return id.after().String()
}
