package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// startPruning is start with a retention window (and a short key retention).
func startPruning(t *testing.T, pool *pgxpool.Pool, pub outbox.Publisher, claim, retention, keys time.Duration) *outbox.Outbox {
	t.Helper()
	relay := outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: claim, AckInterval: time.Millisecond, RetryBackoff: 5 * time.Millisecond,
		Retention: retention, KeyRetention: keys, PruneBatch: 3}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; relay.Wait() })
	return &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: claim}, Relay: relay}
}

func emitKeyed(t *testing.T, ob *outbox.Outbox, pool *pgxpool.Pool, key string) bool {
	t.Helper()
	var rows []outbox.Row
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		r, err := ob.Writer.Write(context.Background(), tx, outbox.Pending{Payload: events.SweepRequested{Reason: key}, DedupeKey: key})
		rows = r
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) > 0 {
		ob.Publish(context.Background(), rows)
	}
	return len(rows) == 1
}

func keysOf(t *testing.T, pool *pgxpool.Pool, sql string) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, k := range ks {
		out[k] = true
	}
	return out
}

// Only published rows older than the window go; an unpublished row stays
// however old it is, and so does a published one inside the window.
func TestPruneDeletesOnlyPublishedRowsOlderThanTheWindow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := startPruning(t, pool, pub, time.Minute, time.Hour, 24*time.Hour)
	for _, k := range []string{"old-published", "new-published", "old-unpublished", "a", "b", "c", "d"} {
		emitKeyed(t, ob, pool, "test:"+k)
	}
	waitPublished(t, pool, 7)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE outbox SET published_at = now() - interval '2 hours', created_at = now() - interval '2 hours'
		WHERE dedupe_key IN ('test:old-published', 'test:a', 'test:b', 'test:c', 'test:d')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE outbox SET published_at = NULL, created_at = now() - interval '3 hours', claimed_until = now() + interval '1 hour'
		WHERE dedupe_key = 'test:old-unpublished'`); err != nil {
		t.Fatal(err)
	}
	// Five rows to delete in batches of three: Prune loops until a short batch.
	n, err := ob.Relay.Prune(ctx)
	if err != nil || n != 5 {
		t.Fatalf("pruned %d rows (%v), want 5", n, err)
	}
	left := keysOf(t, pool, `SELECT dedupe_key FROM outbox`)
	if len(left) != 2 || !left["test:new-published"] || !left["test:old-unpublished"] {
		t.Fatalf("rows left after prune: %v", left)
	}
	if n, err := ob.Relay.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("second prune deleted %d (%v)", n, err)
	}
}

// A kept key (run-finished, bucket notifications) still suppresses its
// duplicate after the outbox row is gone, until its own retention ends; an
// expiring key is free again once its row is pruned.
func TestKeptDedupeKeysOutliveThePrunedRow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := startPruning(t, pool, pub, time.Minute, time.Hour, 24*time.Hour)
	ctx := context.Background()
	kept, expiring := "run-finished:run_1", "step:run_1:2"
	if !emitKeyed(t, ob, pool, kept) || !emitKeyed(t, ob, pool, expiring) {
		t.Fatal("first writes were skipped")
	}
	if emitKeyed(t, ob, pool, kept) || emitKeyed(t, ob, pool, expiring) {
		t.Fatal("a duplicate was written while its row exists")
	}
	waitPublished(t, pool, 2)
	if _, err := pool.Exec(ctx, `UPDATE outbox SET published_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Relay.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if total, _ := published(t, pool); total != 0 {
		t.Fatalf("%d rows left", total)
	}
	if emitKeyed(t, ob, pool, kept) {
		t.Fatal("a late duplicate of run-finished was written after its row was pruned")
	}
	if !emitKeyed(t, ob, pool, expiring) {
		t.Fatal("an expiring key still suppressed after its row was pruned")
	}
	// After the keys' own retention the kept key expires too.
	if _, err := pool.Exec(ctx, `UPDATE outbox_keys SET created_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Relay.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if ks := keysOf(t, pool, `SELECT key FROM outbox_keys`); len(ks) != 0 {
		t.Fatalf("keys left after their retention: %v", ks)
	}
	if !emitKeyed(t, ob, pool, kept) {
		t.Fatal("a kept key still suppressed after its retention")
	}
}

// Two transactions writing one kept key at once: one row, one event.
func TestConcurrentWritersOfAKeptKeyWriteOneRow(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ob := startPruning(t, pool, newFlaky(), time.Minute, time.Hour, 24*time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if emitKeyed(t, ob, pool, "bucket:s3:b:k:v:e:put:1") {
				mu.Lock()
				written++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total, _ := published(t, pool)
	if written != 1 || total != 1 {
		t.Fatalf("%d writers wrote, %d rows; want 1 and 1", written, total)
	}
}

// A prune holding its locks (its transaction still open) does not hold up
// the relay: new rows are written, published and acknowledged, the sweep
// claims unpublished rows and another prune skips the locked rows.
func TestPruneInFlightDoesNotBlockTheRelay(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := newFlaky()
	ob := startPruning(t, pool, pub, 200*time.Millisecond, time.Hour, 24*time.Hour)
	for _, k := range []string{"p1", "p2", "p3", "p4"} {
		emitKeyed(t, ob, pool, "run-finished:"+k)
	}
	waitPublished(t, pool, 4)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE outbox SET published_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if n, err := outbox.PruneBatch(ctx, tx, time.Hour, 100); err != nil || n != 4 {
		t.Fatalf("pruned %d (%v)", n, err)
	}

	done := make(chan error, 1)
	go func() {
		done <- func() error {
			// The fast path: write, publish, acknowledge.
			for _, k := range []string{"n1", "n2"} {
				emitKeyed(t, ob, pool, "step:"+k)
			}
			waitPublished(t, pool, 6) // the pruned rows are still visible to others until commit
			// The sweep, over a row whose claim expired.
			pub.mu.Lock()
			pub.failAll = errors.New("down")
			pub.mu.Unlock()
			emitKeyed(t, ob, pool, "step:n3")
			// The fast path gave up on it (it records the error last).
			for deadline := time.Now().Add(5 * time.Second); ; {
				var failed bool
				if err := pool.QueryRow(ctx, `SELECT last_error IS NOT NULL FROM outbox WHERE dedupe_key = 'step:n3'`).Scan(&failed); err != nil {
					return err
				}
				if failed {
					break
				}
				if time.Now().After(deadline) {
					return errors.New("the fast path never gave up on the failing row")
				}
				time.Sleep(5 * time.Millisecond)
			}
			pub.mu.Lock()
			pub.failAll = nil
			pub.mu.Unlock()
			for deadline := time.Now().Add(5 * time.Second); ; {
				n, err := ob.Relay.Sweep(ctx)
				if err != nil {
					return err
				}
				if n == 1 {
					break
				}
				if time.Now().After(deadline) {
					return errors.New("the sweep never took the unpublished row")
				}
				time.Sleep(20 * time.Millisecond)
			}
			waitPublished(t, pool, 7)
			// Another prune skips the locked rows instead of waiting.
			if n, err := ob.Relay.Prune(ctx); err != nil || n != 0 {
				return errors.Join(err, errors.New("a second prune took locked rows"))
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the relay was blocked by an open prune")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	left := keysOf(t, pool, `SELECT dedupe_key FROM outbox`)
	if len(left) != 3 || !left["step:n1"] || !left["step:n2"] || !left["step:n3"] {
		t.Fatalf("rows after the prune committed: %v", left)
	}
}

// Pruning continuously (window zero) while events are written, some of them
// failing over to the sweep: every event is delivered and acknowledged, and
// no unpublished row is ever deleted.
func TestPruneConcurrentWithRelayLosesNoRows(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	pub := &countingFailer{}
	relay := outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: 100 * time.Millisecond, AckInterval: time.Millisecond,
		RetryBackoff: time.Millisecond, Retention: time.Nanosecond, PruneBatch: 5}, nil)
	rctx, cancel := context.WithCancel(context.Background())
	relayDone := make(chan struct{})
	go func() { _ = relay.Run(rctx); close(relayDone) }()
	defer func() { cancel(); <-relayDone; relay.Wait() }()
	ob := &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: 100 * time.Millisecond}, Relay: relay}
	ctx := context.Background()

	stop := make(chan struct{})
	var pruned, sweeps sync.WaitGroup
	var prunedRows int
	pruned.Add(1)
	go func() {
		defer pruned.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := relay.Prune(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			prunedRows += n
		}
	}()
	sweeps.Add(1)
	go func() {
		defer sweeps.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := relay.Sweep(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const n = 200
	for i := range n {
		err := ob.Tx(ctx, pool, func(tx pgx.Tx, emit outbox.Emit) error {
			return emit(outbox.Pending{Payload: events.SweepRequested{Reason: "load"}, DedupeKey: "load:" + strconv.Itoa(i)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every event was delivered successfully and nothing is left
	// unpublished.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var unpublished int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&unpublished); err != nil {
			t.Fatal(err)
		}
		if pub.succeeded() == n && unpublished == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d events, %d rows unpublished", pub.succeeded(), n, unpublished)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	pruned.Wait()
	sweeps.Wait()
	if pub.failures() == 0 {
		t.Fatal("no publication failed: the sweep path was not exercised")
	}
	if prunedRows == 0 {
		t.Fatal("nothing was pruned while the relay ran")
	}
}

// countingFailer fails the first three publications of every third event
// (the fast path gives up after three, so the row waits for the sweep) and
// counts the events delivered successfully.
type countingFailer struct {
	mu       sync.Mutex
	seen     int
	failed   int
	attempts map[string]int
	ok       map[string]bool
	doomed   map[string]bool
}

func (c *countingFailer) Publish(_ context.Context, ev cloudevents.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attempts == nil {
		c.attempts, c.ok, c.doomed = map[string]int{}, map[string]bool{}, map[string]bool{}
	}
	if c.attempts[ev.ID()] == 0 {
		c.seen++
		c.doomed[ev.ID()] = c.seen%3 == 0
	}
	c.attempts[ev.ID()]++
	if c.doomed[ev.ID()] && c.attempts[ev.ID()] <= 3 {
		c.failed++
		return errors.New("sink unavailable")
	}
	c.ok[ev.ID()] = true
	return nil
}

func (c *countingFailer) succeeded() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.ok) }
func (c *countingFailer) failures() int  { c.mu.Lock(); defer c.mu.Unlock(); return c.failed }
