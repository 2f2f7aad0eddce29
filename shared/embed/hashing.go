package embed

import (
	"context"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
)

// DefaultHashingDim is the dimension NewHashing uses when given none.
const DefaultHashingDim = 1024

// Hashing is the offline default embedder: feature hashing of the keyword
// analyzer's terms. It needs no network and no model, is deterministic across
// processes and versions of Go (fixed hash, no seed), and is a lexical
// baseline, not a semantic model: it matches words, not meanings.
//
// Features: each analyzer term (Latin stems, CJK characters and character
// bigrams) and each pair of adjacent Latin stems. Each feature adds
// ±(1 + ln tf) to one of Dim() buckets (signed hashing, so that collisions
// cancel out on average instead of piling up); the vector is then
// L2-normalised. A text without terms embeds as the zero vector.
type Hashing struct {
	dim int
	an  keyword.Analyzer
}

// NewHashing returns a hashing embedder of dim dimensions
// (DefaultHashingDim when dim <= 0).
func NewHashing(dim int) *Hashing {
	if dim <= 0 {
		dim = DefaultHashingDim
	}
	return &Hashing{dim: dim, an: keyword.NewAnalyzer("auto")}
}

// Dim returns the vector dimension.
func (h *Hashing) Dim() int { return h.dim }

// Model names the embedder and its dimension, e.g. "builtin:hash-ngram-1024".
func (h *Hashing) Model() string { return fmt.Sprintf("builtin:hash-ngram-%d", h.dim) }

// Embed returns one unit vector per text.
func (h *Hashing) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	counts := map[uint64]int{}
	for i, text := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		clear(counts)
		terms := h.an.Terms(text)
		for j, t := range terms {
			counts[hashString(0, t)]++
			if j > 0 && !isCJKTerm(t) && !isCJKTerm(terms[j-1]) {
				counts[hashString(hashString(0, terms[j-1])+1, t)]++
			}
		}
		v := make([]float32, h.dim)
		for f, tf := range counts {
			w := float32(1 + math.Log(float64(tf)))
			if f>>63 != 0 {
				w = -w
			}
			v[f%uint64(h.dim)] += w
		}
		Normalize(v)
		out[i] = v
	}
	return out, nil
}

func isCJKTerm(t string) bool {
	r, _ := utf8.DecodeRuneInString(t)
	return r >= 0x1100 && (unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) || r == 0x30FC)
}

// hashString is FNV-1a over s starting from seed, finished with the
// SplitMix64 mixer so that every bit (bucket and sign) is well distributed.
// Changing it changes every stored vector: keep it stable.
func hashString(seed uint64, s string) uint64 {
	h := uint64(14695981039346656037) ^ seed
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
