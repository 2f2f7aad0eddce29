package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestProviderHTTPErrorsAreClassified(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status    int
		retryable bool
	}{
		{http.StatusBadRequest, false},
		{http.StatusUnauthorized, false},
		{http.StatusForbidden, false},
		{http.StatusNotFound, false},
		{http.StatusRequestTimeout, true},
		{http.StatusConflict, true},
		{http.StatusTooManyRequests, true},
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
		{http.StatusServiceUnavailable, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t)
			s.Enqueue(llmtest.Fail(c.status, "scripted failure "+fmt.Sprint(c.status)))
			_, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil)
			if err == nil {
				t.Fatal("Stream succeeded")
			}
			if got := llm.IsRetryable(err); got != c.retryable {
				t.Errorf("IsRetryable = %v, want %v (%v)", got, c.retryable, err)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ProviderError: %v", err, err)
			}
			if pe.StatusCode != c.status || pe.Provider != "fake" {
				t.Errorf("provider error = %+v", pe)
			}
			if !strings.Contains(pe.Body, "scripted failure") || !strings.Contains(err.Error(), fmt.Sprint(c.status)) {
				t.Errorf("error should carry status and body excerpt: %v", err)
			}
		})
	}
}

func TestRateLimitKeepsRetryAfter(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Fail(http.StatusTooManyRequests, "slow down")
	reply.Header = http.Header{"Retry-After": {"7"}}
	s.Enqueue(reply)
	_, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.RetryAfter != 7*time.Second {
		t.Fatalf("err = %v (%+v)", err, pe)
	}
}

func TestPlainTextErrorBodyIsKept(t *testing.T) {
	t.Parallel()
	hs := newRawServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	})
	_, err := rawModel(t, hs).Stream(testCtx(t), rawRequest(), nil)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 502 || !strings.Contains(pe.Body, "upstream exploded") || !llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestNetworkFailuresAreRetryable(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	reg, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_GONE_BASE_URL=http://" + addr + "/v1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := reg.ChatModel("gone:m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Stream(testCtx(t), userTurn("hi"), nil)
	if err == nil || !llm.IsRetryable(err) {
		t.Fatalf("connection refused: err = %v, retryable = %v", err, llm.IsRetryable(err))
	}
	var te *llm.TransportError
	if !errors.As(err, &te) {
		t.Errorf("want *TransportError, got %T", err)
	}
}

func TestHTTPClientTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("late")
	reply.Block = make(chan struct{}) // held until the client gives up
	s.Enqueue(reply)
	reg, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_FAKE_BASE_URL=" + s.URL()}, &http.Client{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := reg.ChatModel("fake:m")
	_, err = m.Stream(testCtx(t), userTurn("hi"), nil)
	if err == nil || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, retryable = %v", err, llm.IsRetryable(err))
	}
}

func TestMidStreamDisconnectIsRetryable(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("partial ", "answer")
	reply.Disconnect, reply.DisconnectAfter = true, 1
	s.Enqueue(reply)
	var seen string
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), func(d llm.Delta) error {
		seen += d.Content
		return nil
	})
	if err == nil || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, retryable = %v", err, llm.IsRetryable(err))
	}
	if seen != "partial " || resp.Content != "partial " {
		t.Errorf("deltas before the cut should have been delivered: seen=%q resp=%q", seen, resp.Content)
	}
}

func TestStreamErrorEventIsRetryable(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("so far")
	reply.StreamError = "model overloaded"
	s.Enqueue(reply)
	_, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Body, "model overloaded") || !llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelledCallIsNotRetryable(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("never", "finished")
	reply.Block, reply.BlockAfter = make(chan struct{}), 1 // never released
	s.Enqueue(reply)
	ctx, cancel := context.WithCancel(testCtx(t))
	_, err := fakeModel(t, s).Stream(ctx, userTurn("hi"), func(llm.Delta) error {
		cancel() // the caller gives up once the stream is under way
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if llm.IsRetryable(err) {
		t.Errorf("a cancelled call must not be retried: %v", err)
	}
}

func TestIsRetryableOnPlainErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{context.Canceled, false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{&llm.TransportError{Provider: "p", Err: llm.ErrStreamIncomplete}, true},
		{fmt.Errorf("step: %w", &llm.ProviderError{StatusCode: 429}), true},
		{fmt.Errorf("step: %w", &llm.ProviderError{StatusCode: 422}), false},
		{&llm.ProviderError{StatusCode: 0}, true}, // error event inside a stream
	}
	for _, c := range cases {
		if got := llm.IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
