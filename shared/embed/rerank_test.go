package embed_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/embed"
)

func TestRerankParsesSortsAndTruncates(t *testing.T) {
	fake, srv := newFake(t, func(_ int, path string, body map[string]any, w http.ResponseWriter) {
		if path != "/v1/rerank" {
			http.NotFound(w, nil)
			return
		}
		writeJSON(w, map[string]any{"id": "r", "results": []any{
			map[string]any{"index": 2, "relevance_score": 0.91},
			map[string]any{"index": 0, "relevance_score": 0.12},
			map[string]any{"index": 3, "relevance_score": 0.91},
			map[string]any{"index": 1, "relevance_score": 0.55},
		}})
	})
	r, err := embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "bge-reranker"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Rerank(context.Background(), "what is solar power?", []string{"a", "", "c", "d"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []embed.Ranked{{Index: 2, Score: 0.91}, {Index: 3, Score: 0.91}, {Index: 1, Score: 0.55}}
	if !slices.Equal(got, want) {
		t.Fatalf("Rerank = %v, want %v", got, want)
	}
	req := fake.calls()[0]
	if req.Auth != "Bearer k" || req.Body["model"] != "bge-reranker" || req.Body["query"] != "what is solar power?" ||
		req.Body["top_n"] != float64(3) || !slices.Equal(stringList(req.Body["documents"]), []string{"a", " ", "c", "d"}) {
		t.Fatalf("request = %+v", req)
	}
}

func TestRerankAcceptsScoreField(t *testing.T) {
	_, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {
		writeJSON(w, map[string]any{"results": []any{
			map[string]any{"index": 1, "score": 2.5},
			map[string]any{"index": 0, "score": -1.0},
		}})
	})
	r, _ := embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: srv.URL, Model: "m"})
	got, err := r.Rerank(context.Background(), "q", []string{"a", "b"}, 0)
	if err != nil || !slices.Equal(got, []embed.Ranked{{Index: 1, Score: 2.5}, {Index: 0, Score: -1}}) {
		t.Fatalf("Rerank = %v, %v", got, err)
	}
}

func TestRerankReturnsErrors(t *testing.T) {
	cases := map[string]func(w http.ResponseWriter){
		"server error": func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) },
		"bad request":  func(w http.ResponseWriter) { http.Error(w, "model not found", http.StatusBadRequest) },
		"index too large": func(w http.ResponseWriter) {
			writeJSON(w, map[string]any{"results": []any{map[string]any{"index": 9, "relevance_score": 1}}})
		},
		"no score": func(w http.ResponseWriter) {
			writeJSON(w, map[string]any{"results": []any{map[string]any{"index": 0}}})
		},
		"no results": func(w http.ResponseWriter) { writeJSON(w, map[string]any{"results": []any{}}) },
		"not json":   func(w http.ResponseWriter) { _, _ = w.Write([]byte("<html>")) },
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			_, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) { answer(w) })
			r, _ := embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: srv.URL, Model: "m", MaxRetries: 1, RetryBackoff: time.Millisecond})
			got, err := r.Rerank(context.Background(), "q", []string{"a", "b"}, 2)
			if err == nil {
				t.Fatalf("Rerank = %v, want an error", got)
			}
		})
	}
	// Errors carry the provider's status for the caller to decide.
	_, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	r, _ := embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: srv.URL, Model: "m", MaxRetries: -1})
	_, err := r.Rerank(context.Background(), "q", []string{"a"}, 1)
	var pe *embed.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 500 || !pe.Retryable() {
		t.Fatalf("err = %v, want a retryable 500 ProviderError", err)
	}
}

func TestRerankOfNothingCallsNobody(t *testing.T) {
	fake, srv := newFake(t, func(_ int, _ string, _ map[string]any, w http.ResponseWriter) {})
	r, _ := embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: srv.URL, Model: "m"})
	got, err := r.Rerank(context.Background(), "q", nil, 5)
	if err != nil || got != nil || len(fake.calls()) != 0 {
		t.Fatalf("Rerank(nil) = %v, %v after %d calls", got, err, len(fake.calls()))
	}
}
