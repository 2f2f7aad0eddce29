package devbroker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/infra/devbroker"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// subscriber is an httptest server answering with scripted statuses (the
// last one repeats) and remembering what it received.
type subscriber struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []received
	arrived  chan struct{} // one value per request
}

type received struct {
	header http.Header
	body   string
}

func newSubscriber(t *testing.T, statuses ...int) *subscriber {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []int{http.StatusOK}
	}
	s := &subscriber{statuses: statuses, arrived: make(chan struct{}, 64)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, received{r.Header.Clone(), string(b)})
		status := s.statuses[min(len(s.got), len(s.statuses))-1]
		s.mu.Unlock()
		w.WriteHeader(status)
		s.arrived <- struct{}{}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *subscriber) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

// deadLetters collects what the broker gave up on.
type deadLetters struct {
	mu  sync.Mutex
	got []error
}

func newDeadLetters() *deadLetters { return &deadLetters{} }

func (d *deadLetters) record(_ context.Context, _ cloudevents.Event, _ devbroker.Trigger, err error) {
	d.mu.Lock()
	d.got = append(d.got, err)
	d.mu.Unlock()
}

func (d *deadLetters) errors() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]error(nil), d.got...)
}

func newBroker(t *testing.T, triggers []devbroker.Trigger, dl *deadLetters, o devbroker.Options) (*devbroker.Broker, string) {
	t.Helper()
	o.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	if dl != nil {
		o.DeadLetter = dl.record
	}
	b := devbroker.New(triggers, o)
	ingress := httptest.NewServer(b)
	t.Cleanup(func() {
		ingress.Close()
		_ = b.Close()
	})
	return b, ingress.URL
}

func publish(t *testing.T, ingress string, ev cloudevents.Event) {
	t.Helper()
	if err := faas.NewHTTPSender(ingress, nil).Send(t.Context(), ev); err != nil {
		t.Fatalf("publish %s: %v", ev.ID(), err)
	}
}

func step(t *testing.T, id, runID string) cloudevents.Event {
	t.Helper()
	ev, err := events.New(events.Source("tool-invoke"), id, events.StepReady{RunID: runID, ThreadID: "thread_42", StepNo: 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestBrokerRoutesByType(t *testing.T) {
	t.Parallel()
	steps, finished := newSubscriber(t), newSubscriber(t)
	b, ingress := newBroker(t, []devbroker.Trigger{
		{Name: "agent-step", Type: events.TypeStepReady, Subscriber: steps.URL},
		{Name: "dispatcher", Type: events.TypeRunFinished, Subscriber: finished.URL},
	}, nil, devbroker.Options{})

	publish(t, ingress, step(t, "ev-1", "run_1"))
	if err := b.Close(); err != nil { // drains every delivery
		t.Fatal(err)
	}
	if n := len(steps.requests()); n != 1 {
		t.Errorf("agent-step got %d events, want 1", n)
	}
	if n := len(finished.requests()); n != 0 {
		t.Errorf("dispatcher got %d events, want 0", n)
	}
}

func TestBrokerFansOutInBinaryMode(t *testing.T) {
	t.Parallel()
	a, c := newSubscriber(t), newSubscriber(t)
	b, ingress := newBroker(t, []devbroker.Trigger{
		{Name: "a", Type: events.TypeStepReady, Subscriber: a.URL},
		{Name: "c", Type: events.TypeStepReady, Subscriber: c.URL},
	}, nil, devbroker.Options{})

	// Published in structured mode; subscribers get binary mode.
	body := `{"specversion":"1.0","id":"ev-7","source":"/yuxi/agent-step","type":"` + events.TypeStepReady +
		`","datacontenttype":"application/json","runid":"run_7","data":{"run_id":"run_7","thread_id":"thread_42","step_no":1}}`
	resp, err := http.Post(ingress+"/yuxi/default", "application/cloudevents+json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingress: %d, want 202", resp.StatusCode)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*subscriber{"a": a, "c": c} {
		got := s.requests()
		if len(got) != 1 {
			t.Fatalf("%s got %d events, want 1", name, len(got))
		}
		h := got[0].header
		if h.Get("Ce-Id") != "ev-7" || h.Get("Ce-Type") != events.TypeStepReady || h.Get("Ce-Runid") != "run_7" || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v, want binary mode", name, h)
		}
		if got[0].body != `{"run_id":"run_7","thread_id":"thread_42","step_no":1}` {
			t.Errorf("%s: body %s", name, got[0].body)
		}
	}
}

func TestBrokerRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	s := newSubscriber(t, 503, 404, 429, 200)
	dl := newDeadLetters()
	b, ingress := newBroker(t, []devbroker.Trigger{{Name: "s", Subscriber: s.URL}}, dl, devbroker.Options{MaxAttempts: 5})
	publish(t, ingress, step(t, "ev-1", "run_1"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.requests()); n != 4 {
		t.Errorf("attempts = %d, want 4 (three retryable failures, then success)", n)
	}
	if errs := dl.errors(); len(errs) != 0 {
		t.Errorf("dead letters: %v", errs)
	}
}

func TestBrokerDoesNotRetryRefusedEvents(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 413, 422} {
		s := newSubscriber(t, status, 200)
		dl := newDeadLetters()
		b, ingress := newBroker(t, []devbroker.Trigger{{Name: "s", Subscriber: s.URL}}, dl, devbroker.Options{MaxAttempts: 5})
		publish(t, ingress, step(t, "ev-1", "run_1"))
		// Close drains the delivery, retries included, and the dead letter is
		// recorded before it ends: a delivery that was retried (and then
		// acknowledged) fails the checks below instead of leaving a wait for a
		// dead letter hanging until the test binary's timeout.
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if n := len(s.requests()); n != 1 {
			t.Errorf("%d: attempts = %d, want 1", status, n)
		}
		var se *faas.StatusError
		if errs := dl.errors(); len(errs) != 1 || !faas.IsPermanent(errs[0]) || !errors.As(errs[0], &se) || se.StatusCode != status {
			t.Errorf("%d: dead letters %v, want one permanent failure", status, errs)
		}
	}
}

func TestBrokerGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	s := newSubscriber(t, 500)
	dl := newDeadLetters()
	b, ingress := newBroker(t, []devbroker.Trigger{{Name: "s", Subscriber: s.URL}}, dl, devbroker.Options{MaxAttempts: 3})
	publish(t, ingress, step(t, "ev-1", "run_1"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.requests()); n != 3 {
		t.Errorf("attempts = %d, want 3", n)
	}
	if errs := dl.errors(); len(errs) != 1 || faas.IsPermanent(errs[0]) {
		t.Errorf("dead letters %v, want one (retryable) failure", errs)
	}
}

func TestBrokerRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	s := newSubscriber(t)
	b, ingress := newBroker(t, []devbroker.Trigger{{Name: "all", Subscriber: s.URL}}, nil, devbroker.Options{})
	for name, req := range map[string]struct{ contentType, body string }{
		"not a CloudEvent": {"application/json", `{"run_id":"run_1"}`},
		"bad JSON":         {"application/cloudevents+json", `{"specversion":"1.0",`},
		"missing id":       {"application/cloudevents+json", `{"specversion":"1.0","source":"/x","type":"t"}`},
		"missing type":     {"application/cloudevents+json", `{"specversion":"1.0","id":"1","source":"/x"}`},
		"batch":            {"application/cloudevents-batch+json", `[{"specversion":"1.0","id":"1","source":"/x","type":"t"}]`},
	} {
		resp, err := http.Post(ingress, req.contentType, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", name, resp.StatusCode)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("invalid events reached the subscriber %d times", n)
	}
}

func TestBrokerClosedIngress(t *testing.T) {
	t.Parallel()
	b, ingress := newBroker(t, nil, nil, devbroker.Options{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	err := faas.NewHTTPSender(ingress, nil).Send(t.Context(), step(t, "ev-1", "run_1"))
	var se *faas.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || faas.IsPermanent(err) {
		t.Fatalf("publish after Close: %v, want a retryable 503", err)
	}
}

// Shutdown with an expired context abandons pending retries instead of
// waiting out their backoff.
func TestBrokerShutdownAbandonsRetries(t *testing.T) {
	t.Parallel()
	s := newSubscriber(t, 503)
	dl := newDeadLetters()
	b, ingress := newBroker(t, []devbroker.Trigger{{Name: "s", Subscriber: s.URL}}, dl, devbroker.Options{MaxAttempts: 5, Backoff: time.Hour})
	publish(t, ingress, step(t, "ev-1", "run_1"))
	<-s.arrived // first attempt failed; the retry waits an hour

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if errs := dl.errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "shut down") {
		t.Errorf("dead letters %v, want the abandoned delivery", errs)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}

// The broker and the functions' receiver agree: a permanent failure is not
// redelivered, a retry is.
func TestBrokerToFunctionReceiver(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	r := faas.NewRouter("agent-step", nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
	faas.On(r, func(ctx context.Context, in events.StepReady) error {
		mu.Lock()
		defer mu.Unlock()
		calls[in.RunID]++
		switch {
		case in.RunID == "run_perm":
			return faas.Permanent(errors.New("refused"))
		case in.RunID == "run_flaky" && calls[in.RunID] == 1:
			return errors.New("transient")
		}
		return nil
	})
	fn := httptest.NewServer(faas.NewHTTPReceiver(r))
	t.Cleanup(fn.Close)
	dl := newDeadLetters()
	b, ingress := newBroker(t, []devbroker.Trigger{{Name: "agent-step", Type: events.TypeStepReady, Subscriber: fn.URL}}, dl, devbroker.Options{MaxAttempts: 5})

	publish(t, ingress, step(t, "ev-ok", "run_ok"))
	publish(t, ingress, step(t, "ev-perm", "run_perm"))
	publish(t, ingress, step(t, "ev-flaky", "run_flaky"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["run_ok"] != 1 || calls["run_perm"] != 1 || calls["run_flaky"] != 2 {
		t.Errorf("handler calls = %v, want run_ok 1, run_perm 1, run_flaky 2", calls)
	}
	if errs := dl.errors(); len(errs) != 1 || !faas.IsPermanent(errs[0]) {
		t.Errorf("dead letters %v, want only the permanent failure", errs)
	}
}

func TestBrokerHealthz(t *testing.T) {
	t.Parallel()
	_, ingress := newBroker(t, nil, nil, devbroker.Options{})
	resp, err := http.Get(ingress + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}
