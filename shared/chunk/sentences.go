package chunk

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// abbreviations are words after which a period does not end a sentence
// (lower-case, without the final period).
func isAbbreviation(w string) bool {
	switch strings.ToLower(w) {
	case "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "eg", "ie",
		"inc", "ltd", "co", "corp", "fig", "figs", "no", "nos", "vol", "pp", "p", "approx", "dept",
		"est", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
		"mt", "ave", "u.s", "u.k", "cf", "al", "ch", "sec", "art", "ed", "eds", "rev", "gen", "col":
		return true
	}
	return false
}

func isCloser(r rune) bool {
	return strings.ContainsRune("\"')]}”’」』）》】", r)
}

// splitSentences splits text into sentences, as byte spans (trimmed). Chinese
// and Japanese ends (。！？, keeping closing quotes) always split; Latin ends
// (. ! ?) split when followed by whitespace and a character that is not a
// lower-case letter, and a period not after a known abbreviation or a single
// initial. Newlines split too. The original used NLTK punkt for paragraphs
// with Latin letters and a 。！？ regex otherwise; this one rule set does both.
func splitSentences(text string) []span {
	var out []span
	start := 0
	emit := func(end int) {
		s, e := start, end
		for s < e {
			r, size := utf8.DecodeRuneInString(text[s:])
			if !unicode.IsSpace(r) {
				break
			}
			s += size
		}
		for e > s {
			r, size := utf8.DecodeLastRuneInString(text[:e])
			if !unicode.IsSpace(r) {
				break
			}
			e -= size
		}
		if e > s {
			out = append(out, span{s, e})
		}
		start = end
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		next := i + size
		switch {
		case r == '\n':
			emit(next)
		case r == '。' || r == '！' || r == '？':
			end := skipClosers(text, next)
			emit(end)
			next = end
		case r == '.' || r == '!' || r == '?':
			end := skipClosers(text, next)
			if latinBoundary(text, i, end, r) {
				emit(end)
			}
			next = end
		}
		i = next
	}
	emit(len(text))
	return out
}

func skipClosers(text string, i int) int {
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !isCloser(r) {
			break
		}
		i += size
	}
	return i
}

// latinBoundary decides whether the terminator at i (ending, with closers, at
// end) ends a sentence.
func latinBoundary(text string, i, end int, term rune) bool {
	if end >= len(text) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(text[end:])
	if !unicode.IsSpace(r) {
		return false
	}
	j := end
	for j < len(text) {
		r, size := utf8.DecodeRuneInString(text[j:])
		if !unicode.IsSpace(r) {
			break
		}
		j += size
	}
	if j >= len(text) {
		return true
	}
	if nr, _ := utf8.DecodeRuneInString(text[j:]); unicode.IsLower(nr) {
		return false
	}
	if term != '.' {
		return true
	}
	// The word before the period.
	k := i
	for k > 0 {
		pr, size := utf8.DecodeLastRuneInString(text[:k])
		if unicode.IsSpace(pr) || strings.ContainsRune("(\"'“‘", pr) {
			break
		}
		k -= size
	}
	word := text[k:i]
	if utf8.RuneCountInString(word) == 1 {
		if wr, _ := utf8.DecodeRuneInString(word); unicode.IsUpper(wr) {
			return false // an initial: "J. K. Rowling"
		}
	}
	return !isAbbreviation(word)
}

// packSentences packs the sentences of text greedily into pieces of at most
// limit tokens (the original's fallback without an embedder); a sentence over
// the limit is hard-split. Pieces are source substrings, so spacing is kept.
func packSentences(text string, sents []span, limit int) []string {
	if len(sents) == 0 {
		return nil
	}
	var out []string
	first, tok := 0, 0
	for i, s := range sents {
		n := CountTokens(text[s.start:s.end])
		if tok+n > limit && i > first {
			out = append(out, segmentText(text, sents, first, i, limit)...)
			first, tok = i, 0
		}
		tok += n
	}
	return append(out, segmentText(text, sents, first, len(sents), limit)...)
}

// segmentText is the source text of sentences [from, to), hard-split if it
// is over the limit (only possible for a single long sentence).
func segmentText(text string, sents []span, from, to, limit int) []string {
	return hardSplit(text[sents[from].start:sents[to-1].end], limit)
}

// embedBatch is how many sentences go to the Embedder per call.
const embedBatch = 64

// clusterSentences is the semantic preset's answer to a line over the limit:
// with no embedder, or when the sentences fit anyway, they are packed
// greedily (as the original). Otherwise the sentences are embedded and
// grouped into k = ceil(total/limit) runs of consecutive sentences by
// contiguity-constrained agglomerative clustering: starting from one segment
// per sentence, the adjacent pair with the highest average-linkage cosine
// similarity is merged, never beyond limit tokens, until k segments remain or
// no pair can merge. The original ran sklearn's unconstrained
// AgglomerativeClustering (cosine, average linkage) and cut wherever the label
// changed or the size overflowed, which could give more, smaller pieces when
// similar sentences were far apart; here every piece is a run of neighbours.
func clusterSentences(ctx context.Context, text string, limit int, emb Embedder) ([]string, error) {
	sents := splitSentences(text)
	if len(sents) < 2 {
		return hardSplit(text, limit), nil
	}
	toks := make([]int, len(sents))
	total := 0
	for i, s := range sents {
		toks[i] = CountTokens(text[s.start:s.end])
		total += toks[i]
	}
	if emb == nil || total <= limit {
		return packSentences(text, sents, limit), nil
	}
	texts := make([]string, len(sents))
	for i, s := range sents {
		texts[i] = text[s.start:s.end]
	}
	vecs, err := embedAll(ctx, emb, texts)
	if err != nil {
		return nil, err
	}
	k := min((total+limit-1)/limit, len(sents))
	var out []string
	for _, seg := range mergeAdjacent(vecs, toks, k, limit) {
		out = append(out, segmentText(text, sents, seg.start, seg.end, limit)...)
	}
	return out, nil
}

func embedAll(ctx context.Context, emb Embedder, texts []string) ([][]float32, error) {
	vecs := make([][]float32, 0, len(texts))
	for from := 0; from < len(texts); from += embedBatch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch := texts[from:min(from+embedBatch, len(texts))]
		got, err := emb.Embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed %d sentences for semantic chunking: %w", len(batch), err)
		}
		if len(got) != len(batch) {
			return nil, fmt.Errorf("embed sentences for semantic chunking: %d vectors for %d texts", len(got), len(batch))
		}
		vecs = append(vecs, got...)
	}
	return vecs, nil
}

// mergeAdjacent clusters n items into runs (sentence index ranges).
func mergeAdjacent(vecs [][]float32, toks []int, k, limit int) []span {
	n := len(vecs)
	unit := make([][]float64, n)
	for i, v := range vecs {
		unit[i] = normalize(v)
	}
	sim := func(a, b int) float64 { return dot(unit[a], unit[b]) }
	segs := make([]span, n)
	size := make([]int, n)
	for i := range segs {
		segs[i] = span{i, i + 1}
		size[i] = toks[i]
	}
	link := func(a, b span) float64 {
		s := 0.0
		for i := a.start; i < a.end; i++ {
			for j := b.start; j < b.end; j++ {
				s += sim(i, j)
			}
		}
		return s / float64((a.end-a.start)*(b.end-b.start))
	}
	scores := make([]float64, n-1) // scores[i]: segs[i] with segs[i+1]
	for i := range scores {
		scores[i] = link(segs[i], segs[i+1])
	}
	for len(segs) > k {
		best, bestScore := -1, math.Inf(-1)
		for i, s := range scores {
			if size[i]+size[i+1] <= limit && s > bestScore {
				best, bestScore = i, s
			}
		}
		if best < 0 {
			break
		}
		segs[best] = span{segs[best].start, segs[best+1].end}
		size[best] += size[best+1]
		segs = append(segs[:best+1], segs[best+2:]...)
		size = append(size[:best+1], size[best+2:]...)
		scores = append(scores[:best], scores[best+1:]...)
		if best > 0 {
			scores[best-1] = link(segs[best-1], segs[best])
		}
		if best < len(scores) {
			scores[best] = link(segs[best], segs[best+1])
		}
	}
	return segs
}

func normalize(v []float32) []float64 {
	out := make([]float64, len(v))
	norm := 0.0
	for i, x := range v {
		out[i] = float64(x)
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for i := range out {
		out[i] /= norm
	}
	return out
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range min(len(a), len(b)) {
		s += a[i] * b[i]
	}
	return s
}
