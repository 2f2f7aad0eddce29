package keyword

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/kljensen/snowball/english"
)

// stemCache memoizes the Snowball stemmer, the analyzer's most expensive
// step. Word frequencies are Zipfian, so a bounded memo of recent words
// answers most lookups; the result is the same string the stemmer returns,
// so indexing and search are unchanged. It is bounded: a shard that fills up
// is emptied and refilled. Safe for concurrent use.
type stemCache struct {
	seed   maphash.Seed
	shards [stemShards]stemShard
}

const (
	stemShards   = 32
	stemPerShard = 4096 // 128k words in all: a few MiB
)

type stemShard struct {
	mu sync.RWMutex
	m  map[string]string
}

func newStemCache() *stemCache { return &stemCache{seed: maphash.MakeSeed()} }

// stem returns english.Stem(w, true). w may be a substring of a large text:
// the cache keeps a copy, never w itself.
func (c *stemCache) stem(w string) string {
	if len(w) <= 2 {
		return w // the stemmer leaves words this short as they are
	}
	sh := &c.shards[maphash.String(c.seed, w)%stemShards]
	sh.mu.RLock()
	s, ok := sh.m[w]
	sh.mu.RUnlock()
	if ok {
		return s
	}
	s = english.Stem(w, true)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= stemPerShard {
		sh.m = make(map[string]string, stemPerShard)
	}
	k := strings.Clone(w)
	if s == w {
		s = k // an unchanged word: share the copy
	} else {
		s = strings.Clone(s)
	}
	sh.m[k] = s
	sh.mu.Unlock()
	return s
}
