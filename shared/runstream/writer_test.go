package runstream

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

func TestAppendWritesEnvelopeFieldsAndTTL(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix, StreamTTL: time.Hour})

	before := time.Now()
	id1, err := w.Append(ctx, "run1", "thread1", EventMetadata, map[string]any{"request_id": "req1"})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := w.Append(ctx, "run1", "", EventCustom, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, ok1 := parseID(id1)
	b, ok2 := parseID(id2)
	if !ok1 || !ok2 || !a.less(b) {
		t.Fatalf("ids %q, %q must be increasing stream ids", id1, id2)
	}

	key := prefix + "run:events:run1"
	msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != id1 || msgs[1].ID != id2 {
		t.Fatalf("stream holds %v, want ids %s %s", msgs, id1, id2)
	}
	m := msgs[0].Values
	if m["event_type"] != EventMetadata {
		t.Errorf("event_type = %v", m["event_type"])
	}
	ts, err := strconv.ParseInt(m["ts"].(string), 10, 64)
	if err != nil || ts < before.UnixMilli()-1000 || ts > time.Now().UnixMilli()+1000 {
		t.Errorf("ts = %v, want unix ms now", m["ts"])
	}

	var env map[string]json.RawMessage
	if err := json.Unmarshal([]byte(m["payload"].(string)), &env); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema_version", "run_id", "thread_id", "event", "payload", "created_at"} {
		if _, ok := env[k]; !ok {
			t.Errorf("envelope lacks %s", k)
		}
	}
	if len(env) != 6 {
		t.Errorf("envelope has %d keys, want 6: %s", len(env), m["payload"])
	}
	var e Envelope
	if err := json.Unmarshal([]byte(m["payload"].(string)), &e); err != nil {
		t.Fatal(err)
	}
	if e.SchemaVersion != 1 || e.RunID != "run1" || e.ThreadID != "thread1" || e.Event != EventMetadata ||
		string(e.Payload) != `{"request_id":"req1"}` {
		t.Errorf("envelope = %+v", e)
	}
	at, err := time.Parse(createdAtLayout, e.CreatedAt)
	if err != nil || len(e.CreatedAt) != len("2006-01-02T15:04:05.000Z") {
		t.Errorf("created_at %q is not RFC 3339 UTC with ms: %v", e.CreatedAt, err)
	}
	if at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("created_at %s is not now", at)
	}

	var second map[string]json.RawMessage
	_ = json.Unmarshal([]byte(msgs[1].Values["payload"].(string)), &second)
	if string(second["payload"]) != `{}` || string(second["thread_id"]) != `null` {
		t.Errorf("nil payload / empty thread: payload=%s thread_id=%s", second["payload"], second["thread_id"])
	}

	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("stream TTL = %v, %v; want ~1h", ttl, err)
	}
}

func TestAppendBatchKeepsOrderInOneRoundTrip(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	got, err := w.AppendBatch(ctx, "r", "t", []Event{
		{Type: EventMessages, Payload: map[string]int{"n": 1}},
		{Type: EventCustom, Payload: map[string]int{"n": 2}},
		{Type: EventInterrupt, Payload: map[string]int{"n": 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := rdb.XRange(ctx, w.Config().RunKey("r"), "-", "+").Result()
	if len(msgs) != 3 {
		t.Fatalf("stream has %d entries", len(msgs))
	}
	for i, m := range msgs {
		if m.ID != got[i] {
			t.Errorf("entry %d id %s, AppendBatch returned %s", i, m.ID, got[i])
		}
	}
	if msgs[0].Values["event_type"] != EventMessages || msgs[2].Values["event_type"] != EventInterrupt {
		t.Errorf("order lost: %v", msgs)
	}
	if ttl := rdb.PTTL(ctx, w.Config().RunKey("r")).Val(); ttl <= 0 || ttl > DefaultStreamTTL {
		t.Errorf("TTL = %v, want default 2h", ttl)
	}
}

func TestAppendTrimsToApproximateMaxLen(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix, MaxLen: 10})
	evs := make([]Event, 50)
	for i := range evs {
		evs[i] = Event{Type: EventCustom, Payload: map[string]int{"i": i}}
	}
	for range 20 {
		if _, err := w.AppendBatch(ctx, "r", "", evs); err != nil {
			t.Fatal(err)
		}
	}
	// Approximate trimming removes whole macro nodes (100 entries by default).
	if n := rdb.XLen(ctx, w.Config().RunKey("r")).Val(); n >= 1000 || n < 10 {
		t.Fatalf("XLEN = %d after 1000 appends with MAXLEN ~10", n)
	}
}

func TestAppendOnceAppendsOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix, StreamTTL: 10 * time.Minute})
	if _, err := w.Append(ctx, "r", "t", EventCustom, nil); err != nil {
		t.Fatal(err)
	}

	const callers = 32
	var wg sync.WaitGroup
	type res struct {
		id       string
		appended bool
		err      error
	}
	results := make([]res, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, ok, err := w.AppendOnce(ctx, "r", "t", "end", EventEnd, map[string]any{"status": "completed", "caller": i})
			results[i] = res{id, ok, err}
		}()
	}
	wg.Wait()
	appended := 0
	for _, r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.appended {
			appended++
		}
		if r.id != results[0].id {
			t.Errorf("callers disagree on the end id: %s vs %s", r.id, results[0].id)
		}
	}
	if appended != 1 {
		t.Fatalf("%d callers appended, want exactly 1", appended)
	}
	msgs, _ := rdb.XRange(ctx, w.Config().RunKey("r"), "-", "+").Result()
	ends := 0
	for _, m := range msgs {
		if m.Values["event_type"] == EventEnd {
			ends++
			if m.ID != results[0].id {
				t.Errorf("end entry %s, AppendOnce said %s", m.ID, results[0].id)
			}
		}
	}
	if ends != 1 || len(msgs) != 2 {
		t.Fatalf("stream holds %d entries, %d ends", len(msgs), ends)
	}

	// After the end the stream keeps only its tail; the marker outlives it
	// (StreamTTL), so a late duplicate end cannot come back.
	mttl := rdb.PTTL(ctx, prefix+"run:once:r").Val()
	sttl := rdb.PTTL(ctx, w.Config().RunKey("r")).Val()
	if mttl <= 0 || mttl > 10*time.Minute || 10*time.Minute-mttl > 5*time.Second || sttl <= 0 || sttl > w.Config().EndTail || sttl > mttl {
		t.Errorf("marker TTL %v, stream TTL %v: want the StreamTTL and at most the end tail", mttl, sttl)
	}

	// Another key appends again; the same key on another run is independent.
	if _, ok, err := w.AppendOnce(ctx, "r", "t", "other", EventEnd, nil); err != nil || !ok {
		t.Errorf("different once key: appended=%v err=%v", ok, err)
	}
	if _, ok, err := w.AppendOnce(ctx, "r2", "t", "end", EventEnd, nil); err != nil || !ok {
		t.Errorf("different run: appended=%v err=%v", ok, err)
	}
}

func TestNotifyQueueAppendsShortExpiringStream(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	for i := range 500 {
		if _, err := w.NotifyQueue(ctx, "th1", map[string]any{"request_id": "q", "i": i}); err != nil {
			t.Fatal(err)
		}
	}
	key := prefix + "queue:events:th1"
	if key != w.Config().QueueKey("th1") {
		t.Fatalf("QueueKey = %s", w.Config().QueueKey("th1"))
	}
	if n := rdb.XLen(ctx, key).Val(); n > 300 || n < 100 {
		t.Errorf("queue stream length %d, want ~100", n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Errorf("queue stream has no TTL")
	}
	last, _ := rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if len(last) != 1 || last[0].Values["payload"] != `{"i":499,"request_id":"q"}` {
		t.Errorf("last notice = %v", last)
	}
}

func TestAppendOnceBatchKeepsOrderAndAppendsKeyedEventsOnce(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	evs := []OnceEvent{
		{Type: EventCustom, Payload: map[string]string{"name": "yuxi.message_final"}},
		{OnceKey: "interrupt", Type: EventInterrupt, Payload: map[string]string{"reason": "cancelled"}},
		{OnceKey: "end", Type: EventEnd, Payload: map[string]string{"status": "cancelled"}},
	}
	if n, err := w.AppendOnceBatch(ctx, "r", "t", evs); err != nil || n != 3 {
		t.Fatalf("first batch: %d %v", n, err)
	}
	if n, err := w.AppendOnceBatch(ctx, "r", "t", evs[1:]); err != nil || n != 0 {
		t.Fatalf("repeated keyed events were appended again: %d %v", n, err)
	}
	if _, appended, err := w.AppendOnce(ctx, "r", "t", "end", EventEnd, nil); err != nil || appended {
		t.Fatalf("AppendOnce must see the batch's keys: %v %v", appended, err)
	}
	msgs, err := rdb.XRange(ctx, prefix+"run:events:r", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, m := range msgs {
		types = append(types, m.Values["event_type"].(string))
	}
	if got := strings.Join(types, ","); got != "custom,interrupt,end" {
		t.Fatalf("stream: %s", got)
	}
	if ttl := rdb.PTTL(ctx, prefix+"run:events:r").Val(); ttl <= 0 {
		t.Errorf("stream has no TTL: %v", ttl)
	}
}
