package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// flaky is a publisher whose behaviour per event id a test controls.
type flaky struct {
	mu        sync.Mutex
	failAll   error
	fail      map[string]error
	delivered map[string]int
	ch        chan string
}

func newFlaky() *flaky {
	return &flaky{fail: map[string]error{}, delivered: map[string]int{}, ch: make(chan string, 100)}
}

func (f *flaky) Publish(ctx context.Context, ev cloudevents.Event) error {
	f.mu.Lock()
	err := f.fail[ev.ID()]
	if f.failAll != nil {
		err = f.failAll
	}
	f.delivered[ev.ID()]++
	f.mu.Unlock()
	f.ch <- ev.ID()
	return err
}

func (f *flaky) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delivered[id]
}

func start(t *testing.T, pool *pgxpool.Pool, pub outbox.Publisher, claim time.Duration) *outbox.Outbox {
	t.Helper()
	relay := outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: claim, AckInterval: time.Millisecond, RetryBackoff: 5 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; relay.Wait() })
	return &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: claim}, Relay: relay}
}

func published(t *testing.T, pool *pgxpool.Pool) (total, done int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(published_at) FROM outbox`).Scan(&total, &done); err != nil {
		t.Fatal(err)
	}
	return
}

func waitPublished(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, done := published(t, pool); done == want {
			return
		}
		if time.Now().After(deadline) {
			_, done := published(t, pool)
			t.Fatalf("published rows: %d, want %d", done, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expireClaims ends every unpublished row's claim now, in the database's clock.
func expireClaims(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE outbox SET claimed_until = now() - interval '1 second' WHERE published_at IS NULL`); err != nil {
		t.Fatal(err)
	}
}

func TestRolledBackEventsAreNeverPublished(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := start(t, pool, pub, time.Second)
	boom := errors.New("business rule failed")
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if err := emit(outbox.Pending{Payload: events.SweepRequested{Reason: "x"}}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if total, _ := published(t, pool); total != 0 {
		t.Fatalf("rolled back event stored: %d rows", total)
	}
	// A committed event behind it is published: the rollback, not an idle
	// relay, kept the first one out.
	if err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		return emit(outbox.Pending{Payload: events.SweepRequested{Reason: "committed"}})
	}); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, pool, 1)
	if total, _ := published(t, pool); total != 1 {
		t.Fatalf("rows after one rollback and one commit: %d, want 1", total)
	}
	var committed string
	if err := pool.QueryRow(context.Background(), `SELECT event_id FROM outbox`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-pub.ch:
		if id != committed {
			t.Fatalf("rolled back event %s was published", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the committed event never reached the publisher")
	}
}

func TestCommittedEventsArePublishedAndAcknowledged(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := start(t, pool, pub, time.Second)
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		return emit(
			outbox.Pending{Payload: events.StepReady{RunID: "r", ThreadID: "t", StepNo: 1}, DedupeKey: "step:r:1"},
			outbox.Pending{Payload: events.StepReady{RunID: "r", ThreadID: "t", StepNo: 1}, DedupeKey: "step:r:1"}, // duplicate: skipped
			outbox.Pending{Payload: events.SweepRequested{}},
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitPublished(t, pool, 2)
	var ext []byte
	if err := pool.QueryRow(context.Background(), `SELECT extensions FROM outbox WHERE type = $1`, events.TypeStepReady).Scan(&ext); err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(ext, &m); err != nil || m["runid"] != "r" || m["threadid"] != "t" || !strings.HasPrefix(m["traceparent"], "00-") {
		t.Errorf("extensions: %s", ext)
	}
}

func TestUnacknowledgedRowsAreRepublishedBySweepAfterClaimExpires(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	pub.failAll = errors.New("broker down")
	// The claim is long: it is expired in the database below, when the
	// relay has let go of the row, rather than slept through.
	ob := start(t, pool, pub, time.Minute)
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		return emit(outbox.Pending{Payload: events.SweepRequested{Reason: "first"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The fast path tries three times, then leaves the row to the sweep.
	for i := 0; i < 3; i++ {
		<-pub.ch
	}
	ob.Relay.Wait() // the relay gave up on the row (no claim renewals follow)
	// While the writer's claim lasts, a sweep must not take the row.
	if n, err := ob.Relay.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("sweep took a claimed row: %d %v", n, err)
	}
	expireClaims(t, pool)
	n, err := ob.Relay.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("sweep after claim expiry: %d %v", n, err)
	}
	for i := 0; i < 3; i++ {
		<-pub.ch
	}
	if _, done := published(t, pool); done != 0 {
		t.Fatal("a failing publication was acknowledged")
	}
	pub.mu.Lock()
	pub.failAll = nil
	pub.mu.Unlock()
	ob.Relay.Wait()
	// While the sweep's claim lasts, another sweep must not take the row either.
	if n, err := ob.Relay.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("sweep took a row claimed by the previous sweep: %d %v", n, err)
	}
	expireClaims(t, pool)
	if n, err := ob.Relay.Sweep(context.Background()); err != nil || n != 1 {
		t.Fatalf("second sweep: %d %v", n, err)
	}
	waitPublished(t, pool, 1)
	var attempts int
	var lastErr *string
	_ = pool.QueryRow(context.Background(), `SELECT attempts, last_error FROM outbox`).Scan(&attempts, &lastErr)
	if attempts != 2 || lastErr == nil || *lastErr != "broker down" {
		t.Errorf("sweep attempts %d, last error %v", attempts, lastErr)
	}
}

func TestPermanentFailuresAreAcknowledgedNotRetried(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := start(t, pool, outbox.PublisherFunc(func(ctx context.Context, ev cloudevents.Event) error {
		_ = pub.Publish(ctx, ev)
		return faas.Permanent(errors.New("rejected by the sink"))
	}), time.Second)
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		return emit(outbox.Pending{Payload: events.SweepRequested{}})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitPublished(t, pool, 1)
	var id string
	_ = pool.QueryRow(context.Background(), `SELECT event_id FROM outbox`).Scan(&id)
	if c := pub.count(id); c != 1 {
		t.Errorf("permanent failure delivered %d times", c)
	}
}

func TestLocalBusRoutesByTypeAndRecordsMalformedEvents(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	store := outbox.FailureStore{Pool: pool}
	var got []int
	var mu sync.Mutex
	r := faas.NewRouter("agent-step", store, nil)
	faas.On(r, func(ctx context.Context, in events.StepReady) error {
		mu.Lock()
		got = append(got, in.StepNo)
		mu.Unlock()
		if in.StepNo == 9 {
			return errors.New("transient")
		}
		return nil
	})
	bus := outbox.NewLocalBus(r)
	ev, _ := events.New("/test", "e1", events.StepReady{RunID: "r", ThreadID: "t", StepNo: 2}, "")
	if err := bus.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	retry, _ := events.New("/test", "e2", events.StepReady{RunID: "r", ThreadID: "t", StepNo: 9}, "")
	if err := bus.Publish(context.Background(), retry); err == nil || faas.IsPermanent(err) {
		t.Errorf("transient handler error must ask for a retry: %v", err)
	}
	other, _ := events.New("/test", "e3", events.SweepRequested{}, "")
	if err := bus.Publish(context.Background(), other); !faas.IsPermanent(err) {
		t.Errorf("an event nobody handles must fail permanently: %v", err)
	}
	bad := cloudevents.NewEvent()
	bad.SetID("e4")
	bad.SetSource("/test")
	bad.SetType(events.TypeStepReady)
	_ = bad.SetData(cloudevents.ApplicationJSON, map[string]any{"run_id": "r"}) // misses fields
	if err := bus.Publish(context.Background(), bad); err != nil {
		t.Errorf("a malformed event is acknowledged (never retried): %v", err)
	}
	var failures int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM event_failures WHERE event_id = 'e4'`).Scan(&failures)
	if failures != 1 {
		t.Errorf("malformed event not recorded: %d", failures)
	}
	if len(got) != 2 {
		t.Errorf("handler calls: %v", got)
	}
}

// gated blocks every publication of one event type until released, and
// records how many of that type ran at once.
type gated struct {
	typ     string
	release chan struct{}
	mu      sync.Mutex
	running int
	peak    int
	other   chan string
}

func (g *gated) Publish(ctx context.Context, ev cloudevents.Event) error {
	if ev.Type() != g.typ {
		g.other <- ev.ID()
		return nil
	}
	g.mu.Lock()
	g.running++
	g.peak = max(g.peak, g.running)
	g.mu.Unlock()
	<-g.release
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	return nil
}

// A lane bounds its event type's concurrent publications and leaves the
// shared slots to every other type: parsing files in the local runner cannot
// hold up a chat step.
func TestLanesBoundTheirTypeAndLeaveOthersFree(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	g := &gated{typ: events.TypeDocumentUploaded, release: make(chan struct{}), other: make(chan string, 10)}
	relay := outbox.NewRelay(pool, g, outbox.RelayConfig{Claim: time.Minute, MaxInFlight: 2, AckInterval: time.Millisecond,
		Lanes: map[string]int{events.TypeDocumentUploaded: 1}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; relay.Wait() })
	ob := &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: time.Minute}, Relay: relay}

	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		for i := range 4 {
			if err := emit(outbox.Pending{Payload: events.DocumentUploaded{KBID: "kb", FileID: "file_" + string(rune('a'+i))}}); err != nil {
				return err
			}
		}
		return emit(outbox.Pending{Payload: events.StepReady{RunID: "r", ThreadID: "t", StepNo: 1}},
			outbox.Pending{Payload: events.StepReady{RunID: "r", ThreadID: "t", StepNo: 2}},
			outbox.Pending{Payload: events.StepReady{RunID: "r", ThreadID: "t", StepNo: 3}})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every step event gets through while all four uploads wait on their lane
	// of one (MaxInFlight 2 would not fit 4 + 3 otherwise).
	for range 3 {
		select {
		case <-g.other:
		case <-time.After(5 * time.Second):
			t.Fatal("a step event was held up behind the uploads' lane")
		}
	}
	for range 4 {
		g.release <- struct{}{}
	}
	waitPublished(t, pool, 7)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.peak != 1 {
		t.Fatalf("%d uploads published at once in a lane of 1", g.peak)
	}
}

// A row's Before runs once, before its event is published, without the
// producer waiting for it; with no relay it runs at once.
func TestBeforeRunsAheadOfTheEventWithoutBlockingTheProducer(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	pub := newFlaky()
	ob := start(t, pool, pub, time.Second)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ob.Writer.Write(ctx, tx, outbox.Pending{Payload: events.SweepRequested{}})
	if err != nil || tx.Commit(ctx) != nil {
		t.Fatalf("write: %v", err)
	}
	release, ran := make(chan struct{}), 0
	seenAtBefore := -1
	rows[0].Before = func(context.Context) {
		<-release
		seenAtBefore = pub.count(rows[0].Event.ID())
		ran++
	}
	returned := make(chan struct{})
	go func() { ob.Publish(ctx, rows); close(returned) }()
	select {
	case <-returned: // while Before still waits
	case <-time.After(10 * time.Second):
		t.Fatal("Publish waited for the row's Before")
	}
	close(release)
	if id := <-pub.ch; id != rows[0].Event.ID() {
		t.Fatalf("published %s", id)
	}
	ob.Relay.Wait()
	if ran != 1 || seenAtBefore != 0 {
		t.Errorf("Before ran %d times, seeing %d publications (want once, before the event)", ran, seenAtBefore)
	}

	calls := 0
	(&outbox.Outbox{Writer: ob.Writer}).Publish(ctx, []outbox.Row{{ID: 1, Before: func(context.Context) { calls++ }}})
	if calls != 1 {
		t.Errorf("without a relay Before ran %d times, want 1 at once", calls)
	}
}
