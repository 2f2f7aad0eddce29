package runstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

func TestEventWriterWireFormat(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	sw := NewEventWriter(rec)
	sw.Event("messages", "1-0", []byte(`{"a":1}`))
	sw.Event("queued", "", []byte("line1\nline2"))
	sw.Comment("heartbeat")
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "event: messages\ndata: {\"a\":1}\nid: 1-0\n\n" +
		"event: queued\ndata: line1\ndata: line2\n\n" +
		": heartbeat\n\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("wire:\n%q\nwant\n%q", got, want)
	}
	h := rec.Result().Header
	if h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", h)
	}
	if !rec.Flushed {
		t.Fatal("not flushed")
	}
}

// The request SSE shape: subscribe to a queue stream from now on, read state
// when caught up, re-read when woken, heartbeat while idle.
func TestServeStreamWakesOnQueueNoticeAndHeartbeats(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	if _, err := w.NotifyQueue(context.Background(), "th", map[string]string{"old": "notice"}); err != nil {
		t.Fatal(err)
	}

	var reads atomic.Int32 // stands for "queries Postgres"
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		state := func(sw *EventWriter) (bool, error) {
			n := reads.Add(1)
			if n == 3 {
				sw.Event("run_created", "", []byte(`{"run_id":"r1"}`))
				return true, nil
			}
			sw.Event("queued", "", fmt.Appendf(nil, `{"position":%d}`, n))
			return false, nil
		}
		err := ServeStream(rw, r, hub, hub.QueueKey("th"), CursorNew,
			StreamOptions{Heartbeat: 30 * time.Millisecond},
			StreamHooks{
				CaughtUp: func(_ context.Context, sw *EventWriter) (bool, error) { return state(sw) },
				Entries:  func(_ context.Context, sw *EventWriter, _ []Entry) (bool, error) { return state(sw) },
			})
		if err != nil {
			t.Errorf("ServeStream: %v", err)
		}
	}))
	defer srv.Close()

	c := dialSSE(t, srv, "/", nil)
	if ev, _ := c.next(t, 5*time.Second); ev.Event != "queued" || ev.Data != `{"position":1}` || ev.HasID {
		t.Fatalf("initial state %+v", ev)
	}
	// Idle: heartbeats only, no state reads (the old notice did not wake it).
	sawHeartbeat := false
	deadline := time.After(5 * time.Second)
	for !sawHeartbeat {
		select {
		case ev := <-c.events:
			if ev.Comment == "heartbeat" {
				sawHeartbeat = true
			} else {
				t.Fatalf("unexpected event while idle: %+v", ev)
			}
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("idle client read state %d times", n)
	}
	if _, err := w.NotifyQueue(context.Background(), "th", nil); err != nil {
		t.Fatal(err)
	}
	if ev, _ := c.next(t, 5*time.Second); ev.Event != "queued" || ev.Data != `{"position":2}` {
		t.Fatalf("after notice %+v", ev)
	}
	_, _ = w.NotifyQueue(context.Background(), "th", nil)
	rest := c.rest(t, 5*time.Second)
	if len(rest) != 1 || rest[0].Event != "run_created" {
		t.Fatalf("final events %+v", rest)
	}
	waitFor(t, "subscription released", 5*time.Second, func() bool { return hub.Stats().Subscriptions == 0 })
}

func TestServeStreamEndsAtMaxDuration(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	hub := startHub(t, rdb, cfg)
	id, err := NewWriter(rdb, cfg).Append(context.Background(), "r", "", EventCustom, nil)
	if err != nil {
		t.Fatal(err)
	}
	const maxDuration = 100 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_ = ServeStream(rw, r, hub, hub.RunKey("r"), "0-0", StreamOptions{MaxDuration: maxDuration}, StreamHooks{
			Entries: func(_ context.Context, sw *EventWriter, batch []Entry) (bool, error) {
				for _, e := range batch {
					sw.Event(e.Event, e.ID, e.Data)
				}
				return false, nil
			}})
	}))
	defer srv.Close()
	start := time.Now()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	// It served the stream (the backlog) and then ended, not before its
	// maximum duration (the stream has no end event) and not much after.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "id: "+id+"\n") {
		t.Fatalf("status %d, body %q: want the stream's entry %s", resp.StatusCode, body, id)
	}
	if d < maxDuration || d > 5*time.Second {
		t.Fatalf("response lasted %s, want its maximum duration %s", d, maxDuration)
	}
	waitFor(t, "subscription released", 5*time.Second, func() bool { return hub.Stats().Subscriptions == 0 })
}
