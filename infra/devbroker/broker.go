// Package devbroker is a minimal stand-in for a Knative Broker, so the
// platform's functions can run as separate processes with events flowing
// between them over HTTP CloudEvents, wired exactly as Knative wires them:
// producers POST to the broker's ingress, Triggers (read from the same
// manifests as in knative/) filter on event attributes, and every matching
// subscriber gets the event in binary mode, retried with exponential backoff
// on network errors, 5xx, 404, 408, 409 and 429, never on other 4xx, and
// dead-lettered (logged) when attempts run out.
//
// It is for development and tests: the queue lives in memory (a crash loses
// undelivered events; the outbox sweep republishes them, as with any broker
// outage), deliveries are not ordered, reply events in subscriber responses
// are ignored, and sources such as PingSource are not emulated.
//
// Imported by: the local runner and end-to-end tests. May import: shared/faas
// (the sender and its retry classification), the CloudEvents SDK, sigs.k8s.io/yaml and
// the standard library.
package devbroker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// Options tune delivery. Zero values take the defaults.
type Options struct {
	// MaxAttempts is the number of delivery attempts per subscriber,
	// including the first; default 5.
	MaxAttempts int
	// Backoff is the delay before the first retry, doubled for each further
	// one (capped at MaxBackoff); default 200ms, Knative's PT0.2S.
	Backoff    time.Duration
	MaxBackoff time.Duration // default 30s
	// Log receives delivery logs; dead letters are logged at Error.
	Log *slog.Logger
	// Client posts to subscribers; default a client with a 30s timeout.
	Client *http.Client
	// DeadLetter, when set, is also called for every event given up on: not
	// retryable, out of attempts, or the broker shut down.
	DeadLetter func(ctx context.Context, ev cloudevents.Event, t Trigger, err error)
}

// Broker is the ingress (an http.Handler) and the dispatcher.
type Broker struct {
	triggers []Trigger
	senders  []*faas.HTTPSender
	opts     Options
	log      *slog.Logger

	stop   context.Context // cancelled when a shutdown stops waiting for the drain
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

// New returns a broker delivering to triggers. Call Close or Shutdown to
// drain it.
func New(triggers []Trigger, o Options) *Broker {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	b := &Broker{triggers: triggers, opts: o, log: o.Log}
	for _, t := range triggers {
		b.senders = append(b.senders, faas.NewHTTPSender(t.Subscriber, o.Client))
	}
	b.stop, b.cancel = context.WithCancel(context.Background())
	return b
}

// Triggers returns the broker's triggers.
func (b *Broker) Triggers() []Trigger { return b.triggers }

// ServeHTTP is the ingress: POST a CloudEvent (binary or structured mode, any
// path) and get 202 once it is queued for every matching trigger, 400 when it
// is not a valid CloudEvent, 503 after Close. GET /healthz answers 200.
func (b *Broker) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/healthz" && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "events are published with POST")
		return
	}
	ev, status, err := readEvent(req)
	if err != nil {
		b.log.Warn("devbroker: refused event", "status", status, "error", err)
		writeError(w, status, "invalid_event", err.Error())
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "shutting_down", "broker is shutting down")
		return
	}
	matched := 0
	for i, t := range b.triggers {
		if !t.Matches(ev) {
			continue
		}
		matched++
		b.inflight.Add(1)
		go b.deliver(ev.Clone(), t, b.senders[i])
	}
	b.mu.Unlock()
	b.log.Debug("devbroker: accepted event", "type", ev.Type(), "id", ev.ID(), "subscribers", matched)
	w.WriteHeader(http.StatusAccepted)
}

// deliver sends ev to one subscriber until it is acknowledged, refused, out of
// attempts, or the broker stops waiting.
func (b *Broker) deliver(ev cloudevents.Event, t Trigger, s *faas.HTTPSender) {
	defer b.inflight.Done()
	ctx := b.stop
	delay := b.opts.Backoff
	var err error
retry:
	for attempt := 1; ; attempt++ {
		err = s.Send(ctx, ev)
		switch {
		case err == nil:
			b.log.Debug("devbroker: delivered", "trigger", t.Name, "type", ev.Type(), "id", ev.ID(), "attempt", attempt)
			return
		case ctx.Err() != nil:
			err = fmt.Errorf("broker shut down during delivery: %w", err)
			break retry
		case faas.IsPermanent(err) || attempt >= b.opts.MaxAttempts:
			break retry
		}
		b.log.Warn("devbroker: delivery failed, will retry", "trigger", t.Name, "type", ev.Type(), "id", ev.ID(), "attempt", attempt, "in", delay, "error", err)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			err = fmt.Errorf("broker shut down before retry: %w", err)
			break retry
		}
		delay = min(delay*2, b.opts.MaxBackoff)
	}
	b.log.Error("devbroker: dead letter", "trigger", t.Name, "subscriber", t.Subscriber, "type", ev.Type(), "id", ev.ID(), "source", ev.Source(), "permanent", faas.IsPermanent(err), "error", err)
	if b.opts.DeadLetter != nil {
		b.opts.DeadLetter(context.WithoutCancel(ctx), ev, t, err)
	}
}

// Close stops the ingress and waits until every queued delivery has finished,
// retries included.
func (b *Broker) Close() error { return b.Shutdown(context.Background()) }

// Shutdown stops the ingress and waits for queued deliveries like Close; if
// ctx ends first, pending retries are abandoned (dead-lettered) and
// in-flight requests cancelled, and it returns ctx's error.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		b.inflight.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		b.cancel()
		return nil
	case <-ctx.Done():
		b.cancel()
		<-drained
		return fmt.Errorf("devbroker: shutdown: %w", ctx.Err())
	}
}

// maxEventBytes matches the receivers' limit (faas.MaxEventBytes).
const maxEventBytes = faas.MaxEventBytes

func readEvent(req *http.Request) (cloudevents.Event, int, error) {
	var ev cloudevents.Event
	body, err := io.ReadAll(io.LimitReader(req.Body, maxEventBytes+1))
	if err != nil {
		return ev, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	if len(body) > maxEventBytes {
		return ev, http.StatusRequestEntityTooLarge, fmt.Errorf("event body exceeds %d bytes", maxEventBytes)
	}
	msg := cehttp.NewMessage(req.Header, io.NopCloser(bytes.NewReader(body)))
	switch msg.ReadEncoding() {
	case binding.EncodingBatch:
		return ev, http.StatusBadRequest, errors.New("batched CloudEvents are not accepted")
	case binding.EncodingUnknown:
		return ev, http.StatusBadRequest, fmt.Errorf("not a CloudEvent: no ce-specversion header and content type %q is not a CloudEvents format", req.Header.Get("Content-Type"))
	}
	e, err := binding.ToEvent(req.Context(), msg)
	if err != nil {
		return ev, http.StatusBadRequest, fmt.Errorf("decode CloudEvent: %w", err)
	}
	if err := e.Validate(); err != nil {
		return ev, http.StatusBadRequest, fmt.Errorf("invalid CloudEvent: %w", err)
	}
	return *e, 0, nil
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
