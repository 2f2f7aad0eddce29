package faas

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// HTTPSender publishes events in binary content mode to one sink: a Knative
// Broker ingress, the K_SINK of a SinkBinding, or any CloudEvents endpoint.
// It does not retry; the caller (an outbox relay, the dev broker) owns retries
// and uses IsPermanent to decide whether another attempt can help.
type HTTPSender struct {
	target string
	client *http.Client
}

// NewHTTPSender returns a sender posting to target. client may be nil
// (http.DefaultClient); set its Timeout, the sender adds none.
func NewHTTPSender(target string, client *http.Client) *HTTPSender {
	if client == nil {
		client = http.DefaultClient
	}
	return &HTTPSender{target: target, client: client}
}

// Send posts ev and classifies the answer:
//
//	2xx                                   → nil
//	4xx except 404, 408, 409 and 429      → Permanent(err): the event itself was refused
//	network errors, 5xx, 404, 408, 409, 429 and anything else → a plain, retryable error
//
// An event that fails CloudEvents validation is a permanent error and is not sent.
func (s *HTTPSender) Send(ctx context.Context, ev cloudevents.Event) error {
	if err := ev.Validate(); err != nil {
		return Permanent(fmt.Errorf("send event %q: invalid CloudEvent: %w", ev.ID(), err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, nil)
	if err != nil {
		return Permanent(fmt.Errorf("send %s %s: %w", ev.Type(), ev.ID(), err))
	}
	if err := cehttp.WriteRequest(binding.WithForceBinary(ctx), binding.ToMessage(&ev), req); err != nil {
		return Permanent(fmt.Errorf("encode %s %s: %w", ev.Type(), ev.ID(), err))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("send %s %s to %s: %w", ev.Type(), ev.ID(), s.target, err)
	}
	defer resp.Body.Close()
	// Keep a little of the body for the error message, drain the rest so the
	// connection can be reused.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = &StatusError{StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(snippet))}
	err = fmt.Errorf("send %s %s to %s: %w", ev.Type(), ev.ID(), s.target, err)
	if !RetryableStatus(resp.StatusCode) {
		return Permanent(err)
	}
	return err
}

// StatusError is a non-2xx answer from a sink.
type StatusError struct {
	StatusCode int
	Body       string // at most 512 bytes of the response body
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("status %d", e.StatusCode)
	}
	return fmt.Sprintf("status %d: %s", e.StatusCode, e.Body)
}

// RetryableStatus reports whether a delivery answered with status may succeed
// when sent again. It follows Knative's dispatcher: 404 (the subscriber is not
// ready yet), 408, 409, 429 and every status outside 4xx are retryable; other
// 4xx mean the event itself was refused.
func RetryableStatus(status int) bool {
	if status >= 200 && status < 300 {
		return false
	}
	switch status {
	case http.StatusNotFound, http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return status < 400 || status >= 500
}
