package runstream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// After its end a run stream lives EndTail, not StreamTTL; the once-markers
// keep StreamTTL, so a late duplicate end appends nothing and does not bring
// the stream back.
func TestEndLeavesTheStreamAShortTail(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	cfg := Config{Prefix: prefix, StreamTTL: time.Hour, EndTail: 300 * time.Millisecond}
	w := NewWriter(rdb, cfg)
	key, once := cfg.RunKey("r"), cfg.onceKey("r")
	appendN(t, w, "r", 3)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl < 59*time.Minute {
		t.Fatalf("a running stream's TTL is %s, want the StreamTTL", ttl)
	}
	end := []OnceEvent{{OnceKey: "error", Type: EventError, Payload: map[string]any{"retryable": false}},
		{OnceKey: "end", Type: EventEnd, Payload: map[string]string{"status": "failed"}}}
	if n, err := w.AppendOnceBatch(ctx, "r", "th", end); err != nil || n != 2 {
		t.Fatalf("closing events appended %d (%v)", n, err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("an ended stream's TTL is %s, want at most the 300ms tail", ttl)
	}
	if ttl := rdb.PTTL(ctx, once).Val(); ttl < 59*time.Minute {
		t.Fatalf("the once-markers' TTL is %s, want the StreamTTL", ttl)
	}
	waitFor(t, "the ended stream to expire", 5*time.Second, func() bool { return rdb.Exists(ctx, key).Val() == 0 })

	// A redelivered run.finished writes the closing events again: nothing is
	// appended, no stream is created.
	if n, err := w.AppendOnceBatch(ctx, "r", "th", end); err != nil || n != 0 {
		t.Fatalf("late duplicate appended %d (%v)", n, err)
	}
	if _, appended, err := w.AppendOnce(ctx, "r", "th", "end", EventEnd, nil); err != nil || appended {
		t.Fatalf("late AppendOnce of the end appended: %v %v", appended, err)
	}
	if rdb.Exists(ctx, key).Val() != 0 {
		t.Fatal("a late duplicate end recreated the stream")
	}
}

// AppendOnce of an end (the single-event path) sets the tail too.
func TestAppendOnceEndSetsTheTail(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	cfg := Config{Prefix: prefix, StreamTTL: time.Hour, EndTail: time.Minute}
	w := NewWriter(rdb, cfg)
	appendN(t, w, "r", 1)
	if _, appended, err := w.AppendOnce(ctx, "r", "", "end", EventEnd, nil); err != nil || !appended {
		t.Fatalf("end not appended: %v", err)
	}
	if ttl := rdb.PTTL(ctx, cfg.RunKey("r")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL after end %s, want ≤ 1m", ttl)
	}
}

// A client that connects after the tail expired gets exactly one end (the
// synthetic one, with the run's status from the database) and nothing else:
// the final messages are read from Postgres (result, thread history).
func TestClientAfterTheTailGetsExactlyOneEnd(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	cfg := Config{Prefix: prefix, EndTail: 100 * time.Millisecond}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	srv := runServer(t, hub, RunStreamOptions{ThreadID: "th", RequestID: "req-1", Terminal: true, Status: "completed"})
	ids := appendN(t, w, "r", 2)
	if _, err := w.AppendOnceBatch(ctx, "r", "th", []OnceEvent{{OnceKey: "end", Type: EventEnd, Payload: map[string]string{"status": "completed"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ended stream to expire", 5*time.Second, func() bool { return rdb.Exists(ctx, cfg.RunKey("r")).Val() == 0 })
	for _, lastID := range []string{"", ids[1]} {
		path := "/?run=r"
		if lastID != "" {
			path += "&after_seq=" + lastID
		}
		evs := dialSSE(t, srv, path, nil).rest(t, 5*time.Second)
		if len(evs) != 1 || evs[0].Event != EventEnd || !strings.Contains(evs[0].Data, `"status":"completed"`) {
			t.Fatalf("after the tail (cursor %q): %+v, want exactly one end", lastID, evs)
		}
	}
}
