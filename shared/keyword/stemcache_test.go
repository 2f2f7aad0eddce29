package keyword

import (
	"fmt"
	"testing"

	"github.com/kljensen/snowball/english"
)

// The memo answers exactly as the stemmer, across shard resets and for
// words that are substrings of a larger text.
func TestStemCacheMatchesTheStemmer(t *testing.T) {
	t.Parallel()
	c := newStemCache()
	text := "running nationalization generously agreed happiness cats running"
	words := []string{text[0:7], text[8:24], text[25:36], text[37:43], text[44:53], text[54:58], "running"}
	for i := range stemShards * stemPerShard * 2 { // fills and resets every shard
		words = append(words, fmt.Sprintf("word%dings", i))
	}
	for range 2 {
		for _, w := range words {
			if got, want := c.stem(w), english.Stem(w, true); got != want {
				t.Fatalf("stem(%q) = %q, want %q", w, got, want)
			}
		}
	}
	for i := range c.shards {
		if n := len(c.shards[i].m); n > stemPerShard {
			t.Fatalf("shard %d holds %d words, cap %d", i, n, stemPerShard)
		}
	}
}
