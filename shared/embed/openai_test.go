package embed_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// embeddingsHandler answers with vectors that encode each text's length and
// position in its batch, in reverse order, so that order mistakes show.
func embeddingsHandler(dim int) func(int, string, map[string]any, http.ResponseWriter) {
	return func(_ int, path string, body map[string]any, w http.ResponseWriter) {
		if path != "/v1/embeddings" {
			http.NotFound(w, nil)
			return
		}
		input := stringList(body["input"])
		data := make([]map[string]any, len(input))
		// Answer in reverse order: the client must place vectors by index.
		for i := range input {
			v := make([]float64, dim)
			v[0] = float64(len(input[i]))
			v[1] = float64(i)
			data[len(input)-1-i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
		}
		writeJSON(w, map[string]any{"object": "list", "data": data, "model": body["model"]})
	}
}

func TestOpenAIBatchesAndKeepsOrder(t *testing.T) {
	fake, srv := newFake(t, embeddingsHandler(4))
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1/", APIKey: "sk-test", Model: "m", Dim: 4, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("x", i) // text i has length i; text 0 is empty
	}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 150 {
		t.Fatalf("%d vectors for 150 texts", len(vecs))
	}
	for i, v := range vecs {
		wantLen := float32(i)
		if i == 0 {
			wantLen = 1 // the empty text was sent as " "
		}
		if len(v) != 4 || v[0] != wantLen || v[1] != float32(i%64) {
			t.Fatalf("vector %d = %v, want [%v %v …]", i, v, wantLen, i%64)
		}
	}
	calls := fake.calls()
	var sizes []int
	for _, c := range calls {
		sizes = append(sizes, len(stringList(c.Body["input"])))
		if c.Auth != "Bearer sk-test" || c.Body["model"] != "m" || c.Body["encoding_format"] != "float" {
			t.Errorf("request auth=%q body model=%v format=%v", c.Auth, c.Body["model"], c.Body["encoding_format"])
		}
	}
	if !slices.Equal(sizes, []int{64, 64, 22}) {
		t.Errorf("batch sizes = %v, want [64 64 22]", sizes)
	}
	if first := stringList(calls[0].Body["input"]); first[0] != " " {
		t.Errorf("empty input sent as %q, want a single space", first[0])
	}
	if e.Dim() != 4 || e.Model() != "m" {
		t.Errorf("Dim, Model = %d, %q", e.Dim(), e.Model())
	}
}

func TestOpenAIRejectsTheWrongDimension(t *testing.T) {
	_, srv := newFake(t, embeddingsHandler(3))
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "small-model", Dim: 1024})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Embed(context.Background(), []string{"hello"})
	fe, ok := failure.As(err)
	if !ok || fe.Code != embed.CodeDimensionMismatch || fe.Kind != failure.KindUnprocessable {
		t.Fatalf("err = %v, want a coded %s", err, embed.CodeDimensionMismatch)
	}
	if want := "model small-model returned 3 dimensions, the knowledge base expects 1024"; fe.Message != want {
		t.Errorf("message = %q, want %q", fe.Message, want)
	}
}

func TestOpenAILearnsTheDimensionThenHoldsToIt(t *testing.T) {
	dim := 5
	_, srv := newFake(t, func(n int, path string, body map[string]any, w http.ResponseWriter) {
		embeddingsHandler(dim)(n, path, body, w)
	})
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Dim() != 0 {
		t.Fatalf("Dim before any response = %d", e.Dim())
	}
	if _, err := e.Embed(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if e.Dim() != 5 {
		t.Fatalf("learned Dim = %d, want 5", e.Dim())
	}
	dim = 6 // the provider switches models behind the same name
	_, err = e.Embed(context.Background(), []string{"a"})
	if fe, ok := failure.As(err); !ok || fe.Code != embed.CodeDimensionMismatch {
		t.Fatalf("err = %v, want %s", err, embed.CodeDimensionMismatch)
	}
}

func TestOpenAIRetriesRateLimitsAndServerErrors(t *testing.T) {
	fake, srv := newFake(t, func(n int, path string, body map[string]any, w http.ResponseWriter) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
		case 2:
			http.Error(w, "upstream down", http.StatusBadGateway)
		default:
			embeddingsHandler(2)(n, path, body, w)
		}
	})
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(context.Background(), []string{"a", "b"})
	if err != nil || len(vecs) != 2 {
		t.Fatalf("Embed = %v, %v", vecs, err)
	}
	if n := len(fake.calls()); n != 3 {
		t.Fatalf("%d requests, want 3 (two retries)", n)
	}
}

func TestOpenAIGivesUpAfterBoundedRetries(t *testing.T) {
	fake, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: "m", MaxRetries: 2, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Embed(context.Background(), []string{"a"})
	var pe *embed.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 503 || pe.Attempts != 3 || !strings.Contains(pe.Body, "overloaded") {
		t.Fatalf("err = %v, want a 503 ProviderError after 3 attempts", err)
	}
	if n := len(fake.calls()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestOpenAIDoesNotRetryClientErrors(t *testing.T) {
	fake, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {
		http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
	})
	e, _ := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: "m", RetryBackoff: time.Millisecond})
	_, err := e.Embed(context.Background(), []string{"a"})
	var pe *embed.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 401 || !strings.Contains(err.Error(), "invalid api key") {
		t.Fatalf("err = %v, want a 401 ProviderError with the provider's message", err)
	}
	if n := len(fake.calls()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

func TestOpenAIRejectsMalformedAnswers(t *testing.T) {
	answers := map[string]any{
		"too few vectors": map[string]any{"data": []any{map[string]any{"index": 0, "embedding": []float64{1, 2}}}},
		"repeated index": map[string]any{"data": []any{
			map[string]any{"index": 0, "embedding": []float64{1, 2}},
			map[string]any{"index": 0, "embedding": []float64{1, 2}},
		}},
		"empty vector": map[string]any{"data": []any{
			map[string]any{"index": 0, "embedding": []float64{}},
			map[string]any{"index": 1, "embedding": []float64{}},
		}},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			_, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) { writeJSON(w, answer) })
			e, _ := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: "m"})
			if vecs, err := e.Embed(context.Background(), []string{"a", "b"}); err == nil {
				t.Fatalf("accepted %v", vecs)
			}
		})
	}
}

func TestOpenAIStopsRetryingWhenCancelled(t *testing.T) {
	_, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {
		http.Error(w, "busy", http.StatusTooManyRequests)
	})
	e, _ := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL, Model: "m", RetryBackoff: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Embed(ctx, []string{"a"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v, want the deadline promptly", err, time.Since(start))
	}
}

func TestNewOpenAIValidatesConfig(t *testing.T) {
	for _, cfg := range []embed.OpenAIConfig{
		{BaseURL: "http://x", Model: ""},
		{BaseURL: "ftp://x", Model: "m"},
		{BaseURL: "http://x", Model: "m", Dim: -1},
	} {
		if _, err := embed.NewOpenAI(cfg); err == nil {
			t.Errorf("NewOpenAI(%+v) accepted", cfg)
		}
	}
}

func TestOpenAIRetriesDroppedConnections(t *testing.T) {
	fake, srv := newFake(t, func(n int, path string, body map[string]any, w http.ResponseWriter) {
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close() // the connection drops without an answer
			}
			return
		}
		embeddingsHandler(2)(n, path, body, w)
	})
	e, _ := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", RetryBackoff: time.Millisecond})
	if _, err := e.Embed(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.calls()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}
