// Package embed turns text into vectors for knowledge-base search, and
// reranks search candidates: the built-in feature-hashing embedder (offline,
// no model download), and clients for any OpenAI-compatible /embeddings and
// Jina/Cohere-style /rerank endpoint.
//
// Imported by: the knowledge-base packages and functions that index and
// search chunks, and retrieval evaluations. May import: shared/keyword (its
// analyzer), shared/failure and the standard library.
package embed

import (
	"context"
	"math"
)

// Embedder turns texts into vectors of Dim() numbers, one per text, in
// order. Model names the model; a knowledge base records it with its
// dimension, and must be re-indexed to change either.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
	Model() string
}

// Reranker scores docs against query and returns the best topN (all when
// topN <= 0), best first. Ranked.Index refers to docs.
type Reranker interface {
	Rerank(ctx context.Context, query string, docs []string, topN int) ([]Ranked, error)
}

// Ranked is a reranked document: its position in the input and its score.
type Ranked struct {
	Index int
	Score float64
}

// Normalize scales v to unit length in place (a zero vector stays zero).
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}

// Dot is the dot product of two vectors of equal length; for unit vectors it
// is their cosine similarity.
func Dot(a, b []float32) float64 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}
