package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// CodeDimensionMismatch is the failure code of an embedding whose size is not
// the dimension the knowledge base was created with.
const CodeDimensionMismatch = "embedding_dimension_mismatch"

// OpenAIConfig configures an OpenAI-compatible embeddings endpoint.
type OpenAIConfig struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1; requests go
	// to BaseURL + "/embeddings".
	BaseURL string
	APIKey  string // sent as a bearer token when set
	Model   string
	// Dim is the dimension the caller expects (the knowledge base's). Zero:
	// learn it from the first response, then hold every later one to it.
	Dim int
	// BatchSize is the number of texts per request (default 64).
	BatchSize int
	// HTTP is the client to use (default: one with a 2-minute timeout).
	HTTP *http.Client
	// MaxRetries bounds the retries of a request after a 429, a 5xx or a
	// transport failure (default 4; negative: none). RetryBackoff is the
	// first wait, doubled after each retry (default 500 ms); a Retry-After
	// header overrides it. No wait exceeds 20 s.
	MaxRetries   int
	RetryBackoff time.Duration
}

// OpenAI embeds texts with an OpenAI-compatible POST {base}/embeddings
// (OpenAI, Azure-compatible gateways, SiliconFlow, Ollama, vLLM, TEI, …).
// It is safe for concurrent use.
type OpenAI struct {
	c         httpClient
	model     string
	batchSize int
	dim       atomic.Int64 // expected or learned dimension; 0 until known
}

// NewOpenAI validates cfg and returns the embedder.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	if cfg.Model == "" {
		return nil, errors.New("embed: OpenAI embedder needs a model")
	}
	if cfg.Dim < 0 {
		return nil, fmt.Errorf("embed: dimension %d is negative", cfg.Dim)
	}
	c, err := newHTTPClient(cfg.BaseURL, cfg.APIKey, cfg.HTTP, cfg.MaxRetries, cfg.RetryBackoff)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	e := &OpenAI{c: c, model: cfg.Model, batchSize: cfg.BatchSize}
	e.dim.Store(int64(cfg.Dim))
	return e, nil
}

// Dim returns the expected dimension, or the learned one (0 before the first
// response when none was configured).
func (e *OpenAI) Dim() int { return int(e.dim.Load()) }

// Model returns the configured model name.
func (e *OpenAI) Model() string { return e.model }

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in the order of texts, requesting
// BatchSize texts at a time. Empty texts are sent as a single space, since
// providers reject empty input. A vector of the wrong size fails with
// CodeDimensionMismatch (failure.KindUnprocessable): a knowledge base never
// stores vectors of mixed sizes.
func (e *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for start := 0; start < len(texts); start += e.batchSize {
		batch := texts[start:min(start+e.batchSize, len(texts))]
		input := make([]string, len(batch))
		for i, t := range batch {
			if t == "" {
				t = " "
			}
			input[i] = t
		}
		var resp embeddingsResponse
		if err := e.c.post(ctx, "/embeddings", embeddingsRequest{Model: e.model, Input: input, EncodingFormat: "float"}, &resp); err != nil {
			return nil, fmt.Errorf("embed %d texts with %s: %w", len(batch), e.model, err)
		}
		if len(resp.Data) != len(batch) {
			return nil, fmt.Errorf("embed with %s: %d vectors for %d texts", e.model, len(resp.Data), len(batch))
		}
		for _, d := range resp.Data {
			if d.Index < 0 || d.Index >= len(batch) || out[start+d.Index] != nil {
				return nil, fmt.Errorf("embed with %s: bad or repeated index %d in a batch of %d", e.model, d.Index, len(batch))
			}
			if err := e.checkDim(len(d.Embedding)); err != nil {
				return nil, err
			}
			out[start+d.Index] = d.Embedding
		}
	}
	return out, nil
}

func (e *OpenAI) checkDim(n int) error {
	if n == 0 {
		return fmt.Errorf("embed with %s: empty vector", e.model)
	}
	if e.dim.CompareAndSwap(0, int64(n)) {
		return nil // learned from the first vector
	}
	if want := int(e.dim.Load()); n != want {
		return failure.Unprocessable(CodeDimensionMismatch,
			"model %s returned %d dimensions, the knowledge base expects %d", e.model, n, want)
	}
	return nil
}
