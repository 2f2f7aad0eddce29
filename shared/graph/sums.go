package graph

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync"
)

// chunkSums sums entity scores by chunk over mention rows (RankMentioned).
// A query's mentions are tens of thousands of rows, almost every chunk
// among them once, so the table is built for adding new chunks: an
// open-addressing table of (hash, position) slots, probed linearly, with
// the chunk ids copied back to back into one buffer. Adding allocates
// nothing once the buffers have grown (they are pooled), and only the top
// chunks' ids become strings. Timed on figure 19's 300 rankings, same
// calls alternating (p50 of the whole RankMentioned): this table 7.6 ms, a
// pooled Go map of string ids 8.4 ms, a fresh map per query 10.8 ms (its
// growth, an allocation per id and their garbage collection); a sort of
// the rows by hash was slower than either map.
type chunkSums struct {
	seed  maphash.Seed
	hash  func(seed maphash.Seed, b []byte) uint64 // maphash.Bytes; tests collide it
	slots []sumSlot                                // a power of two, at most half used
	buf   []byte                                   // the chunk ids, back to back
	refs  []idRef                                  // chunk i's id in buf and its hash
	sums  []float64                                // chunk i's sum
}

type sumSlot struct {
	h uint64
	i int32 // chunk position + 1; 0: empty
}

type idRef struct {
	h        uint64
	off, len int32
}

// minSlots is the table's initial size.
const minSlots = 1 << 15

func (c *chunkSums) id(i int32) []byte { r := c.refs[i]; return c.buf[r.off : r.off+r.len] }

// add adds w to the sum of the chunk id (its bytes are copied if new).
func (c *chunkSums) add(id []byte, w float64) {
	if 2*(len(c.refs)+1) > len(c.slots) {
		c.grow()
	}
	h := c.hash(c.seed, id)
	mask := len(c.slots) - 1
	for j := int(h) & mask; ; j = (j + 1) & mask {
		s := &c.slots[j]
		if s.i == 0 {
			off := len(c.buf)
			c.buf = append(c.buf, id...)
			c.refs = append(c.refs, idRef{h: h, off: int32(off), len: int32(len(id))})
			c.sums = append(c.sums, w)
			s.h, s.i = h, int32(len(c.refs))
			return
		}
		if s.h == h && bytes.Equal(c.id(s.i-1), id) {
			c.sums[s.i-1] += w
			return
		}
	}
}

// grow doubles the table (or makes the first one) and reinserts the chunks.
func (c *chunkSums) grow() {
	c.slots = make([]sumSlot, max(minSlots, 2*len(c.slots)))
	mask := len(c.slots) - 1
	for i, r := range c.refs {
		j := int(r.h) & mask
		for c.slots[j].i != 0 {
			j = (j + 1) & mask
		}
		c.slots[j] = sumSlot{h: r.h, i: int32(i + 1)}
	}
}

// top returns the limit best chunks (all with limit ≤ 0): highest sum
// first, ties by id in byte order.
func (c *chunkSums) top(limit int) []ScoredChunk {
	order := make([]int32, len(c.refs))
	for i := range order {
		order[i] = int32(i)
	}
	better := func(a, b int32) int {
		if c.sums[a] != c.sums[b] {
			if c.sums[a] > c.sums[b] {
				return -1
			}
			return 1
		}
		return bytes.Compare(c.id(a), c.id(b))
	}
	if limit > 0 && len(order) > limit {
		order = topK(order, limit, better)
	} else {
		slices.SortFunc(order, better)
	}
	out := make([]ScoredChunk, len(order))
	for k, i := range order {
		out[k] = ScoredChunk{ChunkID: string(c.id(i)), Score: c.sums[i]}
	}
	return out
}

// sumsPool keeps a few chunkSums between queries, with their grown
// buffers (about 1.5 MB each at 20,000 rows): a channel, not a sync.Pool,
// which drops its objects at every garbage collection, and the ranking
// allocates enough to run one every few queries.
type sumsPool struct {
	once sync.Once
	seed maphash.Seed
	free chan *chunkSums
}

// pooledSums is how many chunkSums a pool keeps (concurrent rankings
// beyond it allocate their own).
const pooledSums = 4

func (sp *sumsPool) init() {
	sp.once.Do(func() {
		sp.seed = maphash.MakeSeed()
		sp.free = make(chan *chunkSums, pooledSums)
	})
}

func (sp *sumsPool) get() *chunkSums {
	sp.init()
	select {
	case c := <-sp.free:
		return c
	default:
		return &chunkSums{seed: sp.seed, hash: maphash.Bytes}
	}
}

// put returns c to the pool, emptied.
func (sp *sumsPool) put(c *chunkSums) {
	clear(c.slots)
	c.buf, c.refs, c.sums = c.buf[:0], c.refs[:0], c.sums[:0]
	select {
	case sp.free <- c:
	default:
	}
}
