package runstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// textChunk reports its text length to the Batcher.
type textChunk struct {
	Response string `json:"response"`
	Status   string `json:"status"`
}

func (c textChunk) TextLen() int { return len(c.Response) }

// batches returns the item lists of run's messages events, in stream order,
// and the event types of all entries.
func batches(t *testing.T, rdb *redis.Client, w *Writer, run string) ([][]textChunk, []string) {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), w.Config().RunKey(run), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]textChunk
	var types []string
	for _, m := range msgs {
		types = append(types, m.Values["event_type"].(string))
		if m.Values["event_type"] != EventMessages {
			continue
		}
		var env struct {
			Payload struct {
				Items []textChunk `json:"items"`
			} `json:"payload"`
		}
		if err := json.Unmarshal([]byte(m.Values["payload"].(string)), &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env.Payload.Items)
	}
	return out, types
}

func TestBatcherFlushesByTimeWithoutFurtherAdds(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", 50*time.Millisecond, 1<<20)
	defer b.Close(ctx)

	start := time.Now()
	for _, s := range []string{"a", "b", "c"} {
		if err := b.Add(ctx, textChunk{Response: s}); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing else calls the batcher: only its timer can flush.
	waitFor(t, "timer flush", 5*time.Second, func() bool {
		got, _ := batches(t, rdb, w, "r")
		return len(got) == 1
	})
	elapsed := time.Since(start)
	got, _ := batches(t, rdb, w, "r")
	if len(got[0]) != 3 || got[0][0].Response != "a" || got[0][2].Response != "c" {
		t.Fatalf("batch = %+v, want a,b,c in one event", got)
	}
	t.Logf("first chunk reached the stream after %s (flushEvery 50ms)", elapsed)

	// The next batch gets its own timer.
	if err := b.Add(ctx, textChunk{Response: "d"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "second timer flush", 5*time.Second, func() bool {
		got, _ := batches(t, rdb, w, "r")
		return len(got) == 2
	})
}

func TestBatcherFlushesWhenTextExceedsMaxChars(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", time.Hour, 10)
	defer b.Close(ctx)

	for _, s := range []string{"1234", "5678"} {
		if err := b.Add(ctx, textChunk{Response: s, Status: "loading-with-long-json-that-does-not-count"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := batches(t, rdb, w, "r"); len(got) != 0 {
		t.Fatalf("flushed at 8 chars of text: %+v", got)
	}
	if err := b.Add(ctx, textChunk{Response: "90ab"}); err != nil { // 12 > 10
		t.Fatal(err)
	}
	got, _ := batches(t, rdb, w, "r")
	if len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("after exceeding maxChars: %+v, want one batch of 3 (synchronously)", got)
	}
}

func TestBatcherCountsJSONLengthOfPlainChunks(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", time.Hour, 20)
	defer b.Close(ctx)
	if err := b.Add(ctx, map[string]string{"response": "0123456789abcdef"}); err != nil { // 29 bytes of JSON
		t.Fatal(err)
	}
	if got, _ := batches(t, rdb, w, "r"); len(got) != 1 {
		t.Fatalf("plain chunk over maxChars not flushed: %v", got)
	}
}

func TestBatcherUrgentFlushesImmediatelyWithPendingChunks(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", time.Hour, 1<<20)
	defer b.Close(ctx)

	_ = b.Add(ctx, textChunk{Response: "thinking"})
	if err := b.AddUrgent(ctx, textChunk{Status: "tool_call"}); err != nil {
		t.Fatal(err)
	}
	got, _ := batches(t, rdb, w, "r")
	if len(got) != 1 || len(got[0]) != 2 || got[0][1].Status != "tool_call" {
		t.Fatalf("urgent add: %+v, want [thinking, tool_call] flushed at once", got)
	}
}

func TestBatcherAppendOrdersEventAfterBufferedChunks(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", time.Hour, 1<<20)

	_ = b.Add(ctx, textChunk{Response: "x"})
	if err := b.Append(ctx, EventCustom, map[string]string{"name": "yuxi.stream_event"}); err != nil {
		t.Fatal(err)
	}
	_ = b.Add(ctx, textChunk{Response: "y"})
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, types := batches(t, rdb, w, "r")
	want := []string{EventMessages, EventCustom, EventMessages}
	if len(types) != 3 || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Fatalf("event order %v, want %v", types, want)
	}
	if got[0][0].Response != "x" || got[1][0].Response != "y" {
		t.Fatalf("batches %+v", got)
	}
	if err := b.Add(ctx, textChunk{}); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestBatcherEmptyFlushWritesNothing(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	w := NewWriter(rdb, Config{Prefix: prefix})
	b := w.NewBatcher("r", "t", 0, 0)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.XLen(ctx, w.Config().RunKey("r")).Val(); n != 0 {
		t.Fatalf("empty batcher wrote %d entries", n)
	}
	// The same kind of batcher with one chunk writes it: the emptiness, not
	// an inert batcher, kept the stream empty above.
	b2 := w.NewBatcher("r2", "t", 0, 0)
	if err := b2.Add(ctx, textChunk{Response: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := b2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := batches(t, rdb, w, "r2"); len(got) != 1 || len(got[0]) != 1 || got[0][0].Response != "x" {
		t.Fatalf("one chunk: %+v, want one batch of it", got)
	}
}
