package embed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// OpenAIRerankerConfig configures a rerank endpoint in the Jina / Cohere /
// SiliconFlow format.
type OpenAIRerankerConfig struct {
	// BaseURL is the API root; requests go to BaseURL + "/rerank".
	BaseURL string
	APIKey  string
	Model   string
	HTTP    *http.Client
	// MaxRetries and RetryBackoff as in OpenAIConfig.
	MaxRetries   int
	RetryBackoff time.Duration
}

// OpenAIReranker reranks with POST {base}/rerank
// {model, query, documents, top_n} → {results: [{index, relevance_score}]}.
// It is safe for concurrent use.
type OpenAIReranker struct {
	c     httpClient
	model string
}

// NewOpenAIReranker validates cfg and returns the reranker.
func NewOpenAIReranker(cfg OpenAIRerankerConfig) (*OpenAIReranker, error) {
	if cfg.Model == "" {
		return nil, errors.New("embed: reranker needs a model")
	}
	c, err := newHTTPClient(cfg.BaseURL, cfg.APIKey, cfg.HTTP, cfg.MaxRetries, cfg.RetryBackoff)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	return &OpenAIReranker{c: c, model: cfg.Model}, nil
}

type rerankRequest struct {
	Model           string   `json:"model"`
	Query           string   `json:"query"`
	Documents       []string `json:"documents"`
	TopN            int      `json:"top_n"`
	ReturnDocuments bool     `json:"return_documents"`
}

type rerankResponse struct {
	Results []struct {
		Index          int      `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
		Score          *float64 `json:"score"` // Text Embeddings Inference and some gateways
	} `json:"results"`
}

// Rerank scores docs against query and returns the best topN (all when
// topN <= 0 or more than there are), best first, ties by input order.
// Failures are returned, never replaced by the input order: the caller
// decides whether to fall back.
func (r *OpenAIReranker) Rerank(ctx context.Context, query string, docs []string, topN int) ([]Ranked, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	if topN <= 0 || topN > len(docs) {
		topN = len(docs)
	}
	input := make([]string, len(docs))
	for i, d := range docs {
		if d == "" {
			d = " "
		}
		input[i] = d
	}
	var resp rerankResponse
	if err := r.c.post(ctx, "/rerank", rerankRequest{Model: r.model, Query: query, Documents: input, TopN: topN}, &resp); err != nil {
		return nil, fmt.Errorf("rerank %d documents with %s: %w", len(docs), r.model, err)
	}
	if len(resp.Results) == 0 {
		return nil, fmt.Errorf("rerank with %s: no results for %d documents", r.model, len(docs))
	}
	seen := make([]bool, len(docs))
	out := make([]Ranked, 0, len(resp.Results))
	for _, res := range resp.Results {
		if res.Index < 0 || res.Index >= len(docs) || seen[res.Index] {
			return nil, fmt.Errorf("rerank with %s: bad or repeated index %d for %d documents", r.model, res.Index, len(docs))
		}
		seen[res.Index] = true
		score := res.RelevanceScore
		if score == nil {
			score = res.Score
		}
		if score == nil {
			return nil, fmt.Errorf("rerank with %s: result %d has no relevance_score", r.model, res.Index)
		}
		out = append(out, Ranked{Index: res.Index, Score: *score})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Index < out[j].Index
	})
	if len(out) > topN {
		out = out[:topN]
	}
	return out, nil
}
