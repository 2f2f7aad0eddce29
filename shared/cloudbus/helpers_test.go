package cloudbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus/cloudbustest"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// newAWSFake starts the AWS fake for t.
func newAWSFake(t *testing.T) *cloudbustest.AWS {
	f := cloudbustest.NewAWS()
	t.Cleanup(f.Close)
	return f
}

// startRelay runs an outbox relay publishing through pub, the way
// shared/bootstrap runs one in a function.
func startRelay(t *testing.T, pool *pgxpool.Pool, pub outbox.Publisher) *outbox.Outbox {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	relay := outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: time.Minute, AckInterval: time.Millisecond, RetryBackoff: 5 * time.Millisecond}, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; relay.Wait() })
	return &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("test"), Claim: time.Minute}, Relay: relay}
}

// emit commits payloads in one transaction and returns their event ids by run id.
func emit(t *testing.T, pool *pgxpool.Pool, ob *outbox.Outbox, ps ...events.Payload) {
	t.Helper()
	err := ob.Tx(context.Background(), pool, func(tx pgx.Tx, emit outbox.Emit) error {
		for _, p := range ps {
			if err := emit(outbox.Pending{Payload: p}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func steps(n int, prefix string) []events.Payload {
	out := make([]events.Payload, n)
	for i := range out {
		out[i] = events.StepReady{RunID: fmt.Sprintf("%s%02d", prefix, i), ThreadID: "thread_" + prefix, StepNo: 1}
	}
	return out
}

func counts(t *testing.T, pool *pgxpool.Pool) (total, done int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(published_at) FROM outbox`).Scan(&total, &done); err != nil {
		t.Fatal(err)
	}
	return
}

// waitFor polls cond (a database or fake state) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitPublished(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d published rows", want), func() bool { _, done := counts(t, pool); return done == want })
}

func expireClaims(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE outbox SET claimed_until = now() - interval '1 second' WHERE published_at IS NULL`); err != nil {
		t.Fatal(err)
	}
}

// stepSink is a function's router taking step events, as the receiving side
// of a transport decodes them.
type stepSink struct {
	mu   sync.Mutex
	runs map[string]int
	tps  map[string]string
	r    *faas.Router
}

func newStepSink() *stepSink {
	s := &stepSink{runs: map[string]int{}, tps: map[string]string{}}
	s.r = faas.NewRouter("agent-step", nil, nil)
	faas.On(s.r, func(ctx context.Context, in events.StepReady) error {
		s.mu.Lock()
		s.runs[in.RunID]++
		s.tps[in.RunID] = events.TraceparentFrom(ctx)
		s.mu.Unlock()
		return nil
	})
	return s
}

// decodeStructured reads a structured CloudEvent (an EventBridge detail or
// an SQS body).
func decodeStructured(t *testing.T, s string) cloudevents.Event {
	t.Helper()
	ev := cloudevents.NewEvent()
	if err := json.Unmarshal([]byte(s), &ev); err != nil {
		t.Fatalf("not a structured CloudEvent: %v: %s", err, s)
	}
	return ev
}
