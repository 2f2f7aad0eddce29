package embed_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/embed"
)

func TestHashingIsDeterministicAndNormalized(t *testing.T) {
	texts := []string{
		"Solar panels convert sunlight into electricity.",
		"太阳能电池板把阳光转化为电能。",
		"Mixed 文本 with English and 中文",
		"",
	}
	a, err := embed.NewHashing(256).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := embed.NewHashing(256).Embed(context.Background(), texts) // another instance ("process")
	for i := range texts {
		if len(a[i]) != 256 || !slices.Equal(a[i], b[i]) {
			t.Fatalf("text %d: not deterministic or wrong size", i)
		}
		norm := math.Sqrt(embed.Dot(a[i], a[i]))
		want := 1.0
		if texts[i] == "" {
			want = 0 // no terms, no direction
		}
		if math.Abs(norm-want) > 1e-5 {
			t.Errorf("text %d: norm %v, want %v", i, norm, want)
		}
	}
}

// The hashing is pinned: changing it would silently change every vector
// stored by knowledge bases that use this model name.
func TestHashingIsPinned(t *testing.T) {
	v, err := embed.NewHashing(64).Embed(context.Background(), []string{"solar panels"})
	if err != nil {
		t.Fatal(err)
	}
	// Three features, "solar", "panel" and the pair, in three buckets.
	x := float32(1 / math.Sqrt(3))
	want := make([]float32, 64)
	want[15], want[27], want[30] = -x, -x, x
	for i := range want {
		if math.Abs(float64(v[0][i]-want[i])) > 1e-6 {
			t.Fatalf("vector = %v, want %v", v[0], want)
		}
	}
}

func TestHashingRanksRelatedTextsCloser(t *testing.T) {
	h := embed.NewHashing(1024)
	vecs, err := h.Embed(context.Background(), []string{
		"How do solar panels generate electricity?",
		"Solar panels generate electricity from sunlight.",
		"The recipe needs flour, eggs and sugar.",
		"北京是中国的首都",
		"中国的首都是北京吗",
	})
	if err != nil {
		t.Fatal(err)
	}
	if related, unrelated := embed.Dot(vecs[0], vecs[1]), embed.Dot(vecs[0], vecs[2]); related <= unrelated+0.2 {
		t.Errorf("cosine(related) = %.3f, cosine(unrelated) = %.3f", related, unrelated)
	}
	if related, unrelated := embed.Dot(vecs[3], vecs[4]), embed.Dot(vecs[3], vecs[2]); related <= unrelated+0.2 {
		t.Errorf("Chinese: cosine(related) = %.3f, cosine(unrelated) = %.3f", related, unrelated)
	}
	if h.Model() != "builtin:hash-ngram-1024" || h.Dim() != 1024 {
		t.Errorf("Model, Dim = %q, %d", h.Model(), h.Dim())
	}
	if embed.NewHashing(0).Dim() != embed.DefaultHashingDim {
		t.Errorf("default dimension = %d", embed.NewHashing(0).Dim())
	}
	var _ embed.Embedder = h
}
