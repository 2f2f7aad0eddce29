package faas_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func TestSenderPostsBinaryMode(t *testing.T) {
	t.Parallel()
	type seen struct {
		method string
		header http.Header
		body   string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Clone(), string(b)}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)

	ev, err := events.New(events.Source("agent-step"), "ev-42", events.StepReady{RunID: "run_1", ThreadID: "thread_1", StepNo: 3}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err != nil {
		t.Fatal(err)
	}
	if err := faas.NewHTTPSender(srv.URL, srv.Client()).Send(t.Context(), ev); err != nil {
		t.Fatalf("send: %v", err)
	}
	s := <-got
	want := map[string]string{
		"Ce-Specversion": "1.0",
		"Ce-Id":          "ev-42",
		"Ce-Source":      "/yuxi/agent-step",
		"Ce-Type":        events.TypeStepReady,
		"Ce-Runid":       "run_1",
		"Ce-Threadid":    "thread_1",
		"Ce-Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Content-Type":   "application/json",
	}
	if s.method != http.MethodPost {
		t.Errorf("method = %s", s.method)
	}
	for k, v := range want {
		if s.header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, s.header.Get(k), v)
		}
	}
	if s.body != `{"run_id":"run_1","thread_id":"thread_1","step_no":3}` {
		t.Errorf("body = %s", s.body)
	}
}

func TestSenderClassifiesStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status    int
		ok        bool
		permanent bool
	}{
		{200, true, false},
		{202, true, false},
		{204, true, false},
		{400, false, true},
		{401, false, true},
		{403, false, true},
		{413, false, true},
		{415, false, true},
		{422, false, true},
		{404, false, false},
		{408, false, false},
		{409, false, false},
		{429, false, false},
		{500, false, false},
		{502, false, false},
		{503, false, false},
		{504, false, false},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, `{"error":{"code":"x","message":"because"}}`)
			}))
			t.Cleanup(srv.Close)
			err := faas.NewHTTPSender(srv.URL, srv.Client()).Send(t.Context(), stepEvent(t, "ev-1", "run_1"))
			if tc.ok {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("err = nil")
			}
			if faas.IsPermanent(err) != tc.permanent {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, !tc.permanent, tc.permanent)
			}
			var se *faas.StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status || se.Body == "" {
				t.Errorf("err %v does not carry status %d and the body", err, tc.status)
			}
		})
	}
}

func TestSenderNetworkErrorIsRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	err := faas.NewHTTPSender(url, nil).Send(t.Context(), stepEvent(t, "ev-1", "run_1"))
	if err == nil || faas.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
}

func TestSenderCancelledContextIsRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := faas.NewHTTPSender(srv.URL, srv.Client()).Send(ctx, stepEvent(t, "ev-1", "run_1"))
	if err == nil || faas.IsPermanent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a retryable context.Canceled", err)
	}
}

func TestSenderRefusesInvalidEvent(t *testing.T) {
	t.Parallel()
	calls := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls <- struct{}{} }))
	t.Cleanup(srv.Close)
	ev := cloudevents.NewEvent()
	ev.SetType(events.TypeStepReady) // no id, no source
	err := faas.NewHTTPSender(srv.URL, srv.Client()).Send(t.Context(), ev)
	if !faas.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
	if len(calls) != 0 {
		t.Fatal("an invalid event was sent")
	}
}

// The sender and the receiver agree on what may be retried.
func TestSenderToReceiver(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	srv := httptest.NewServer(faas.NewHTTPReceiver(fn.router))
	t.Cleanup(srv.Close)
	s := faas.NewHTTPSender(srv.URL, srv.Client())

	if err := s.Send(t.Context(), stepEvent(t, "ev-ok", "run_ok")); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Send(t.Context(), stepEvent(t, "ev-perm", "run_perm")); !faas.IsPermanent(err) {
		t.Fatalf("permanent failure: err = %v, want permanent", err)
	}
	if err := s.Send(t.Context(), stepEvent(t, "ev-retry", "run_retry")); err == nil || faas.IsPermanent(err) {
		t.Fatalf("retry: err = %v, want retryable", err)
	}
	bad := stepEvent(t, "ev-bad", "run_ok")
	bad.SetType("io.yuxi.unknown.v1")
	if err := s.Send(t.Context(), bad); !faas.IsPermanent(err) {
		t.Fatalf("unknown type: err = %v, want permanent", err)
	}
}
