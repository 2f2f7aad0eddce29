package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProviderError is an error answered by an embedding or rerank provider: an
// HTTP status that is not retried (or still failing after the retries).
type ProviderError struct {
	URL        string
	StatusCode int
	// Body is a short excerpt of the provider's answer.
	Body     string
	Attempts int
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("POST %s: HTTP %d", e.URL, e.StatusCode)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Retryable reports whether the provider may succeed later (429 or 5xx).
func (e *ProviderError) Retryable() bool { return retryableStatus(e.StatusCode) }

func retryableStatus(code int) bool { return code == http.StatusTooManyRequests || code >= 500 }

const (
	defaultMaxRetries   = 4
	defaultRetryBackoff = 500 * time.Millisecond
	maxRetryWait        = 20 * time.Second
	bodyExcerptLimit    = 512
	maxResponseBytes    = 256 << 20
)

// httpClient posts JSON to a provider with bounded retries.
type httpClient struct {
	base, apiKey string
	http         *http.Client
	maxRetries   int
	backoff      time.Duration
}

func newHTTPClient(base, apiKey string, c *http.Client, maxRetries int, backoff time.Duration) (httpClient, error) {
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return httpClient{}, fmt.Errorf("base URL %q: want http(s)://host[/path]", base)
	}
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Minute}
	}
	if maxRetries == 0 {
		maxRetries = defaultMaxRetries
	}
	if maxRetries < 0 {
		maxRetries = 0
	}
	if backoff <= 0 {
		backoff = defaultRetryBackoff
	}
	return httpClient{base: base, apiKey: apiKey, http: c, maxRetries: maxRetries, backoff: backoff}, nil
}

// post sends body to base+path and decodes a 2xx answer into out. It retries
// 429, 5xx and transport failures up to maxRetries times, waiting backoff,
// doubling, or what Retry-After asks (at most 20 s each).
func (c httpClient) post(ctx context.Context, path string, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	url := c.base + path
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		retryAfter, err := c.once(ctx, url, payload, out, attempt)
		if err == nil {
			return nil
		}
		if attempt > c.maxRetries || !retryable(ctx, err) {
			return err
		}
		d := wait
		if retryAfter > 0 {
			d = retryAfter
		}
		t := time.NewTimer(min(d, maxRetryWait))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		wait *= 2
	}
}

func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Retryable()
	}
	var de *decodeError
	return !errors.As(err, &de) // transport failures are retried, garbled answers are not
}

type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

func (c httpClient) once(ctx context.Context, url string, payload []byte, out any, attempt int) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return 0, &decodeError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, bodyExcerptLimit))
		var after time.Duration
		if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
			after = time.Duration(s) * time.Second
		}
		return after, &ProviderError{URL: url, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(excerpt)), Attempts: attempt}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(out); err != nil {
		return 0, &decodeError{fmt.Errorf("POST %s: decode response: %w", url, err)}
	}
	return 0, nil
}
