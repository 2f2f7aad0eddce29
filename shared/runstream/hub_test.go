package runstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

func TestHubFansOutManyStreamsToManySubscribers(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)

	const streams, subsPer, events = 20, 5, 40
	subs := make([][]*Subscription, streams)
	for s := range streams {
		for range subsPer {
			sub := hub.Subscribe(hub.RunKey(fmt.Sprint("run", s)), "0-0")
			defer sub.Close()
			subs[s] = append(subs[s], sub)
		}
	}
	for s := range streams {
		for _, sub := range subs[s] {
			<-sub.CaughtUp()
		}
	}

	var wg sync.WaitGroup
	want := make([][]string, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range events {
				id, err := w.Append(context.Background(), fmt.Sprint("run", s), "", EventCustom, map[string]int{"i": i})
				if err != nil {
					t.Error(err)
					return
				}
				want[s] = append(want[s], id)
			}
		}()
	}
	wg.Wait()
	for s := range streams {
		for j, sub := range subs[s] {
			got := ids(recv(t, sub, events, 10*time.Second))
			if !slices.Equal(got, want[s]) {
				t.Fatalf("stream %d sub %d: got %v, want %v", s, j, got, want[s])
			}
			expectQuiet(t, sub, 0)
		}
	}
	if st := hub.Stats(); st.Streams != streams || st.Subscriptions != streams*subsPer {
		t.Fatalf("stats %+v", st)
	}
}

// A producer appends without pause while subscribers join the stream the hub
// already follows, from the start and from cursors in the middle: each must
// see exactly the stream after its cursor — backlog then live, no gap, no dup.
func TestHubLateSubscribersGetBacklogThenLiveWithoutGapsOrDuplicates(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, SubscriptionBuffer: 100000}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	key := hub.RunKey("r")

	early := hub.Subscribe(key, "0-0") // makes the hub follow the stream
	defer early.Close()
	<-early.CaughtUp()

	const total = 3000
	produced := make(chan string, total)
	go func() {
		defer close(produced)
		for i := range total {
			id, err := w.Append(context.Background(), "r", "", EventCustom, map[string]int{"i": i})
			if err != nil {
				t.Error(err)
				return
			}
			produced <- id
		}
	}()

	type late struct {
		sub    *Subscription
		cursor string
	}
	var lates []late
	var seen []string
	for id := range produced {
		seen = append(seen, id)
		switch len(seen) {
		case 100, 700, 1500, 2200, 2900:
			lates = append(lates,
				late{hub.Subscribe(key, "0-0"), "0-0"},
				late{hub.Subscribe(key, seen[len(seen)/2]), seen[len(seen)/2]},
				late{hub.Subscribe(key, id), id})
		}
	}
	if len(seen) != total {
		t.Fatalf("producer wrote %d entries", len(seen))
	}
	got := ids(recv(t, early, total, 20*time.Second))
	if !slices.Equal(got, seen) {
		t.Fatal("early subscriber: entries differ from the stream")
	}
	for _, l := range lates {
		defer l.sub.Close()
		from := 0
		if l.cursor != "0-0" {
			from = slices.Index(seen, l.cursor) + 1
		}
		want := seen[from:]
		got := ids(recv(t, l.sub, len(want), 20*time.Second))
		if !slices.Equal(got, want) {
			t.Fatalf("late subscriber after %s: %d entries, first %v; want %d entries from %s",
				l.cursor, len(got), got[:min(3, len(got))], len(want), want[0])
		}
		expectQuiet(t, l.sub, 20*time.Millisecond)
	}
}

func TestHubSubscribeWakesABlockedReaderPromptly(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, ReadBlock: time.Minute}
	w := NewWriter(rdb, cfg)
	reader := prefix + "reader"
	hub := startHub(t, namedClient(t, reader), cfg)

	first := hub.Subscribe(hub.RunKey("a"), "0-0")
	defer first.Close()
	<-first.CaughtUp()
	// Wait until the reader blocks on {a, wake}: a live entry of a came
	// through the shared read (so a is in its read set), and the next read
	// is blocked.
	waitFor(t, "a followed", 5*time.Second, func() bool { return hub.Stats().Streams == 1 })
	if _, err := w.Append(context.Background(), "a", "", EventCustom, nil); err != nil {
		t.Fatal(err)
	}
	recv(t, first, 1, 5*time.Second)
	waitBlockedRead(t, rdb, reader)

	sub := hub.Subscribe(hub.RunKey("b"), CursorNew)
	defer sub.Close()
	<-sub.CaughtUp()
	start := time.Now()
	id, err := w.Append(context.Background(), "b", "", EventCustom, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The block is a minute: only the wake stream can make this quick.
	got := recv(t, sub, 1, 10*time.Second)
	if got[0].ID != id {
		t.Fatalf("got %s, want %s", got[0].ID, id)
	}
	t.Logf("live entry on a newly subscribed stream after %s (block 1m)", time.Since(start))
}

func TestHubUnsubscribeShrinksTheReadSet(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, ReadBlock: time.Minute}
	hub := startHub(t, rdb, cfg)

	a := hub.Subscribe(hub.RunKey("a"), "0-0")
	b1 := hub.Subscribe(hub.RunKey("b"), "0-0")
	b2 := hub.Subscribe(hub.RunKey("b"), "0-0")
	defer a.Close()
	waitFor(t, "two streams followed", 5*time.Second, func() bool { return hub.Stats().Streams == 2 })
	reads := hub.Stats().Reads

	b1.Close()
	if st := hub.Stats(); st.Streams != 2 || st.Subscriptions != 2 {
		t.Fatalf("closing one of two subscriptions changed the set: %+v", st)
	}
	b2.Close()
	b2.Close() // idempotent
	if st := hub.Stats(); st.Streams != 1 || st.Subscriptions != 1 {
		t.Fatalf("after closing b: %+v", st)
	}
	// The reader is woken and re-issues its XREAD without b.
	waitFor(t, "reader re-issued", 5*time.Second, func() bool { return hub.Stats().Reads > reads })
	if _, ok := <-b1.C(); ok {
		t.Fatal("closed subscription still delivers")
	}
	if b1.Err() != nil {
		t.Fatalf("Err after Close = %v", b1.Err())
	}
}

func TestHubSlowConsumerOverflowClosesOnlyThatSubscription(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, SubscriptionBuffer: 8}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	key := hub.RunKey("r")

	slow := hub.Subscribe(key, "0-0")
	fast := hub.Subscribe(key, "0-0")
	other := hub.Subscribe(hub.RunKey("other"), "0-0")
	defer fast.Close()
	defer other.Close()
	<-slow.CaughtUp()
	<-fast.CaughtUp()
	<-other.CaughtUp()

	// The fast consumer keeps up (lockstep); the slow one never reads.
	const n = 60
	for i := range n {
		id, err := w.Append(context.Background(), "r", "", EventCustom, map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if got := recv(t, fast, 1, 5*time.Second); got[0].ID != id {
			t.Fatalf("fast consumer got %s, want %s", got[0].ID, id)
		}
	}

	// The slow one keeps what fitted its buffer, then its channel closes.
	kept := 0
	for range slow.C() {
		kept++
	}
	if !errors.Is(slow.Err(), ErrSlowConsumer) {
		t.Fatalf("slow subscription ended with %v", slow.Err())
	}
	if kept > 8 {
		t.Fatalf("slow consumer buffered %d entries, buffer is 8", kept)
	}
	if st := hub.Stats(); st.SlowClosed != 1 || st.Subscriptions != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The others are unaffected.
	id, _ := w.Append(context.Background(), "other", "", EventCustom, nil)
	if got := recv(t, other, 1, 5*time.Second); got[0].ID != id {
		t.Fatalf("other stream got %v", got)
	}
}

func TestHubIdleSubscribersCostOnlyTheSharedRead(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, ReadBlock: 5 * time.Second}
	reader := prefix + "reader"
	hub := startHub(t, namedClient(t, reader), cfg)
	for i := range 50 {
		sub := hub.Subscribe(hub.RunKey(fmt.Sprint("idle", i)), "0-0")
		defer sub.Close()
		<-sub.CaughtUp()
	}
	waitFor(t, "50 streams followed", 5*time.Second, func() bool { return hub.Stats().Streams == 50 })
	// The wake-ups settled: the reader is blocked in XREAD and no read
	// started for a while (a wake-up still in flight ends one more block).
	var before int64
	waitFor(t, "the wake-ups settled", 10*time.Second, func() bool {
		waitBlockedRead(t, rdb, reader)
		before = hub.Stats().Reads
		time.Sleep(200 * time.Millisecond) // settling interval of this poll
		return hub.Stats().Reads == before
	})
	// An observation window, not a wait for a state: nothing may happen in it.
	time.Sleep(1500 * time.Millisecond)
	if d := hub.Stats().Reads - before; d > 1 {
		t.Fatalf("50 idle subscribers caused %d XREADs in 1.5s with a 5s block", d)
	}
}

func TestHubCursorNewSkipsExistingEntries(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	appendN(t, w, "r", 5)

	sub := hub.Subscribe(hub.RunKey("r"), CursorNew)
	defer sub.Close()
	<-sub.CaughtUp()
	expectQuiet(t, sub, 20*time.Millisecond)
	id, _ := w.Append(context.Background(), "r", "", EventEnd, nil)
	got := recv(t, sub, 1, 5*time.Second)
	if got[0].ID != id || got[0].Event != EventEnd {
		t.Fatalf("got %+v", got[0])
	}
}

func TestHubSubscribeBeforeRunAndStop(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix}
	w := NewWriter(rdb, cfg)
	want := appendN(t, w, "r", 3)

	hub := NewHub(rdb, cfg, nil)
	sub := hub.Subscribe(hub.RunKey("r"), "")
	if got := ids(recv(t, sub, 3, 5*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("backlog before Run: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	id, _ := w.Append(context.Background(), "r", "", EventCustom, nil)
	if got := recv(t, sub, 1, 5*time.Second); got[0].ID != id {
		t.Fatalf("live after Run started: %v", got)
	}
	if err := hub.Run(ctx); err == nil {
		t.Fatal("second Run must fail")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, ok := <-sub.C(); ok || !errors.Is(sub.Err(), ErrHubClosed) {
		t.Fatalf("subscription after stop: err %v", sub.Err())
	}
	late := hub.Subscribe(hub.RunKey("r"), "0-0")
	if _, ok := <-late.C(); ok || !errors.Is(late.Err(), ErrHubClosed) {
		t.Fatalf("Subscribe after stop: err %v", late.Err())
	}
	if n := rdb.Exists(context.Background(), hub.wakeKey).Val(); n != 0 {
		t.Fatal("wake stream left behind")
	}
}

func TestHubCloseDuringCatchUpClosesChannel(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.New(t)
	cfg := Config{Prefix: prefix, SubscriptionBuffer: 4}
	w := NewWriter(rdb, cfg)
	hub := startHub(t, rdb, cfg)
	appendN(t, w, "r", 50)

	sub := hub.Subscribe(hub.RunKey("r"), "0-0")
	recv(t, sub, 2, 5*time.Second) // the catch-up is now blocked on the full channel
	sub.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-sub.C():
			if !ok {
				if st := hub.Stats(); st.Subscriptions != 0 || st.Streams != 0 {
					t.Fatalf("stats after close %+v", st)
				}
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after Close during catch-up")
		}
	}
}
