package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// ErrStreamIncomplete is wrapped by the error Stream returns when the
// provider closed the stream before saying why the turn finished (no
// finish_reason): the answer may be cut short, so the turn is retried.
var ErrStreamIncomplete = errors.New("stream ended before a finish_reason")

// bodyExcerptLimit bounds how much of a provider's error body is kept; error
// bodies are logged and stored with failed runs, so they stay short.
const bodyExcerptLimit = 512

// ProviderError is a failure answered by the provider: an HTTP error status,
// or an error event inside an otherwise successful stream (StatusCode 0 then,
// unless the event carried an HTTP-like code).
type ProviderError struct {
	Provider   string
	StatusCode int
	// Body is a short excerpt of the provider's answer (at most 512 bytes).
	Body string
	// RetryAfter is the provider's Retry-After hint, zero when absent.
	RetryAfter time.Duration
}

func (e *ProviderError) Error() string {
	if e.StatusCode == 0 {
		return fmt.Sprintf("provider %s: error event in stream: %s", e.Provider, e.Body)
	}
	return fmt.Sprintf("provider %s: HTTP %d %s: %s", e.Provider, e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// Retryable reports whether asking again may succeed: timeouts, conflicts,
// rate limits, server errors and mid-stream error events.
func (e *ProviderError) Retryable() bool {
	switch {
	case e.StatusCode == 0:
		return true
	case e.StatusCode == http.StatusRequestTimeout, e.StatusCode == http.StatusConflict,
		e.StatusCode == http.StatusTooManyRequests, e.StatusCode >= 500:
		return true
	default:
		return false
	}
}

// TransportError is a failure to talk to the provider at all, or a stream
// that broke off: connection refused or reset, timeouts, truncated or
// garbled streams. It is always retryable.
type TransportError struct {
	Provider string
	Err      error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("provider %s: transport: %v", e.Provider, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// IsRetryable reports whether a failed model call may succeed when repeated:
// true for network errors, timeouts and HTTP 408/409/429/5xx; false for other
// 4xx answers (bad request, auth, unknown model), for invalid requests
// rejected before sending, and for the caller's own context being cancelled
// or past its deadline (the caller gave up; retrying under the same context
// cannot help).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Retryable()
	}
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// excerpt shortens a provider body for error messages, keeping valid UTF-8.
func excerpt(b []byte) string {
	if len(b) <= bodyExcerptLimit {
		return string(b)
	}
	cut := bodyExcerptLimit
	for cut > 0 && b[cut]&0xC0 == 0x80 { // do not split a multi-byte rune
		cut--
	}
	return string(b[:cut]) + "…"
}

// parseRetryAfter understands both forms of Retry-After (seconds, HTTP date).
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var secs int
	if _, err := fmt.Sscanf(v, "%d", &secs); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
