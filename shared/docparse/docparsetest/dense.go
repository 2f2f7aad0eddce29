package docparsetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// DensePDF writes a multi-page document as dense as a journal article, for
// measuring extraction speed: every page has a running title and two
// columns of 56 lines of 10 pt Helvetica (left at x=60, right at x=320,
// sharing their baselines), each line filled with words to about 215 points
// like justified text, about 900 words a page. The words are drawn from a
// fixed list with a generator seeded by seed, so a (pages, seed) pair always
// gives the same file; each column's lines are written top to bottom, the
// left column first. (The benchmark document of shared/docparse/pdf's own
// tests, exported for benchmark harnesses.)
func DensePDF(pages int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	ps := make([]Page, 0, pages)
	for p := range pages {
		left, right := make([]string, 56), make([]string, 56)
		for i := range 56 {
			left[i], right[i] = denseLine(rng), denseLine(rng)
		}
		runs := []Run{{X: 200, Y: 750, Size: 14, Text: fmt.Sprintf("Generated benchmark document, page %d", p+1)}}
		runs = append(runs, Lines(60, 720, 12, 10, left...)...)
		runs = append(runs, Lines(320, 720, 12, 10, right...)...)
		ps = append(ps, Page{Runs: runs})
	}
	return PDF(ps...)
}

var denseWords = strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an " +
	"they you were her she there all one word text column page reading order extraction layout paragraph document benchmark " +
	"glyph font baseline gutter")

// denseLine fills a line of 10 pt Helvetica to at most 215 points.
func denseLine(rng *rand.Rand) string {
	var b strings.Builder
	w := 0.0
	for {
		word := denseWords[rng.IntN(len(denseWords))]
		ww := 0.0
		for _, r := range word + " " {
			ww += helveticaAdvance(r) / 100 // thousandths of an em at 10 pt
		}
		if w+ww > 215 {
			return b.String()
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(word)
		w += ww
	}
}

// helveticaLower are Helvetica's advance widths of a–z, in thousandths of
// an em (the standard 14 fonts' metrics); a space is 278.
var helveticaLower = [26]float64{556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278,
	556, 500, 722, 500, 500, 500}

// helveticaAdvance is the advance width of r in Helvetica, in thousandths of
// an em: exact for lower-case letters and the space, 556 for anything else.
func helveticaAdvance(r rune) float64 {
	switch {
	case r == ' ':
		return 278
	case r >= 'a' && r <= 'z':
		return helveticaLower[r-'a']
	}
	return 556
}
