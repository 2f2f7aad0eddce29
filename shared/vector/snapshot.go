package vector

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync"
)

// Slots are grouped in fixed-size blocks so that a change copies only the
// blocks it touches (copy-on-write): searches read an immutable snapshot
// without locks while a refresh builds the next one.
const (
	blockShift = 10
	blockSize  = 1 << blockShift
	blockMask  = blockSize - 1
)

// block holds blockSize slots. vecs is contiguous, so the exact scan is one
// tight loop over memory.
type block struct {
	vecs []float32 // blockSize*dim, unit length
	grp  []int32   // group index; -1 for a free slot
	ids  []string
	ver  []int64 // version of the write that last touched the slot
}

func newBlock(dim int) *block {
	b := &block{
		vecs: make([]float32, blockSize*dim),
		grp:  make([]int32, blockSize),
		ids:  make([]string, blockSize),
		ver:  make([]int64, blockSize),
	}
	for i := range b.grp {
		b.grp[i] = -1
	}
	return b
}

func (b *block) clone() *block {
	return &block{
		vecs: slices.Clone(b.vecs),
		grp:  slices.Clone(b.grp),
		ids:  slices.Clone(b.ids),
		ver:  slices.Clone(b.ver),
	}
}

// snapshot is one immutable state of a cached collection. Slots never move
// within a layout (a full reload starts a new layout), so an HNSW graph built
// over an older snapshot of the same layout still addresses the right slots.
type snapshot struct {
	epoch   int64  // incarnation of the collection (vector_collections.epoch)
	version int64  // every write with a version ≤ this is included
	layout  uint64 // slot layout; changes on every full load
	dim     int

	blocks []*block
	slots  int // slots [0, slots) have been used
	live   int

	groups    []string // group index → file id; append-only within a layout
	groupIx   map[string]int32
	groupLive []int32 // live vectors per group

	// index, when not nil, is a graph over the slots that were live at
	// index.version; dirty lists the slots written after it (searched exactly).
	index *hnsw
	dirty []int32
	stale int // entries of dirty written after the graph (the rest are held out)

	bytes int64 // approximate memory held, for the LRU cap
}

func (s *snapshot) vec(slot int32) []float32 {
	b := s.blocks[slot>>blockShift]
	off := int(slot&blockMask) * s.dim
	return b.vecs[off : off+s.dim : off+s.dim]
}

func (s *snapshot) computeBytes() {
	per := int64(s.dim)*4 + 4 + 8 + 16
	n := int64(len(s.blocks)) * blockSize * per
	n += int64(len(s.groups)) * 48
	for _, b := range s.blocks {
		for _, id := range b.ids {
			n += int64(len(id))
		}
	}
	if s.index != nil {
		n += s.index.bytes
	}
	n += int64(cap(s.dirty)) * 4
	s.bytes = n
}

// writeState is what a refresh needs besides the snapshot: where each id
// lives and which slots are free. It belongs to the collection and is only
// touched under its lock.
type writeState struct {
	idSlot map[string]int32
	free   []int32
}

// mutator derives a new snapshot from the latest one by applying changes.
// Blocks are cloned on first write unless the slot lies beyond what older
// snapshots can see (appends to the tail block need no copy).
type mutator struct {
	s        *snapshot
	st       *writeState
	oldSlots int
	owned    map[int]bool
	ixShared bool // groupIx still shared with the old snapshot
	ixVer    int64
	tmp      []float32
}

func newMutator(old *snapshot, st *writeState, version int64) *mutator {
	s := *old
	s.version = version
	s.blocks = slices.Clone(old.blocks)
	s.groupLive = slices.Clone(old.groupLive)
	m := &mutator{s: &s, st: st, oldSlots: old.slots, owned: map[int]bool{}, ixShared: true, ixVer: -1}
	if old.index != nil {
		m.ixVer = old.index.version
	}
	return m
}

// freshSnapshot starts an empty snapshot (a full load) and its write state.
func freshSnapshot(epoch, version int64, layout uint64, dim int) (*snapshot, *writeState) {
	s := &snapshot{epoch: epoch, version: version, layout: layout, dim: dim, groupIx: map[string]int32{}}
	return s, &writeState{idSlot: map[string]int32{}}
}

func (m *mutator) writable(slot int32) *block {
	bi := int(slot >> blockShift)
	for bi >= len(m.s.blocks) {
		m.s.blocks = append(m.s.blocks, newBlock(m.s.dim))
		m.owned[len(m.s.blocks)-1] = true
	}
	if m.owned[bi] || int(slot) >= m.oldSlots {
		return m.s.blocks[bi]
	}
	b := m.s.blocks[bi].clone()
	m.s.blocks[bi] = b
	m.owned[bi] = true
	return b
}

func (m *mutator) group(name string) int32 {
	if g, ok := m.s.groupIx[name]; ok {
		return g
	}
	if m.ixShared {
		m.s.groupIx = cloneMap(m.s.groupIx)
		m.ixShared = false
	}
	g := int32(len(m.s.groups))
	m.s.groups = append(m.s.groups, name)
	m.s.groupIx[name] = g
	m.s.groupLive = append(m.s.groupLive, 0)
	return g
}

// markDirty lists slot among those searched exactly beside the graph,
// unless it already is: written after the graph, or held out of it.
func (m *mutator) markDirty(b *block, i int, slot int32) {
	h := m.s.index
	if h == nil || b.ver[i] > m.ixVer || int(slot) < len(h.levels) && h.levels[slot] == heldOut {
		return
	}
	m.s.dirty = append(m.s.dirty, slot)
	m.s.stale++
}

// upsert writes one vector, given as the stored little-endian bytes.
func (m *mutator) upsert(id, grp string, raw []byte, ver int64) {
	slot, exists := m.st.idSlot[id]
	if !exists {
		if n := len(m.st.free); n > 0 {
			slot = m.st.free[n-1]
			m.st.free = m.st.free[:n-1]
		} else {
			slot = int32(m.s.slots)
			m.s.slots++
		}
		m.st.idSlot[id] = slot
	}
	b := m.writable(slot)
	i := int(slot & blockMask)
	m.markDirty(b, i, slot)
	if old := b.grp[i]; old >= 0 {
		m.s.groupLive[old]--
	} else {
		m.s.live++
	}
	g := m.group(grp)
	m.s.groupLive[g]++
	b.grp[i] = g
	b.ids[i] = id
	b.ver[i] = ver
	v := b.vecs[i*m.s.dim : (i+1)*m.s.dim]
	decodeVec(v, raw)
	normalize(v)
}

// remove frees id's slot. The vector stays in place so that a graph built
// over it still routes through it; searches skip free slots.
func (m *mutator) remove(id string, ver int64) {
	slot, ok := m.st.idSlot[id]
	if !ok {
		return
	}
	delete(m.st.idSlot, id)
	b := m.writable(slot)
	i := int(slot & blockMask)
	m.markDirty(b, i, slot)
	if g := b.grp[i]; g >= 0 {
		m.s.groupLive[g]--
		m.s.live--
	}
	b.grp[i] = -1
	b.ids[i] = ""
	b.ver[i] = ver
	m.st.free = append(m.st.free, slot)
}

func (m *mutator) done() *snapshot {
	m.s.computeBytes()
	return m.s
}

func decodeVec(dst []float32, raw []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
}

func encodeVec(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func cloneMap(m map[string]int32) map[string]int32 {
	c := make(map[string]int32, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// withIndex returns a copy of s that uses index h (built over an older
// snapshot of the same layout); the slots written since h.version become the
// dirty list.
func (s *snapshot) withIndex(h *hnsw) *snapshot {
	c := *s
	c.index = h
	c.dirty, c.stale = nil, 0
	for bi, b := range s.blocks {
		base := bi << blockShift
		for i, v := range b.ver[:max(0, min(blockSize, s.slots-base))] {
			slot := base + i
			switch {
			case v > h.version:
				c.dirty = append(c.dirty, int32(slot))
				c.stale++
			case slot < len(h.levels) && h.levels[slot] == heldOut:
				c.dirty = append(c.dirty, int32(slot))
			}
		}
	}
	c.computeBytes()
	return &c
}

// searchParams tunes one search.
type searchParams struct {
	k        int
	groups   []string // nil: all groups
	efSearch int      // fixed HNSW candidate list size; 0: the graph's calibrated one
	workers  int      // goroutines for a large exact scan
	useIndex bool     // the collection is large enough for the graph
}

// searchPath names the way a search was answered, for tests and stats.
type searchPath int

const (
	pathEmpty searchPath = iota
	pathExact
	pathExactGroups
	pathIndex
	pathIndexFallback
)

// parallelFloats is the scan size (in float32s) above which an exact scan is
// split across goroutines: below it the goroutine start-up is not repaid.
const parallelFloats = 1 << 19

// search finds the k nearest live vectors to the unit vector q.
func (s *snapshot) search(q []float32, p searchParams) ([]Hit, searchPath) {
	if s.live == 0 || p.k <= 0 {
		return nil, pathEmpty
	}
	var allowed []bool
	selected := s.live
	if p.groups != nil {
		allowed = make([]bool, len(s.groups))
		selected = 0
		for _, g := range p.groups {
			if i, ok := s.groupIx[g]; ok && !allowed[i] {
				allowed[i] = true
				selected += int(s.groupLive[i])
			}
		}
		if selected == 0 {
			return nil, pathEmpty
		}
	}
	k := min(p.k, selected)

	if s.index != nil && s.index.usable && p.useIndex {
		// A graph pays off for a filter only when the filter keeps a large
		// share of the collection; otherwise scanning the few groups exactly
		// costs less than the candidates a post-filter would throw away.
		if allowed == nil || selected*4 >= s.live && selected > k*8 {
			if t := s.searchIndex(q, k, p.efSearch, allowed, selected); t != nil {
				return s.hits(t), pathIndex
			}
			return s.hits(s.exact(q, k, allowed, p.workers)), pathIndexFallback
		}
	}
	path := pathExact
	if allowed != nil {
		path = pathExactGroups
	}
	return s.hits(s.exact(q, k, allowed, p.workers)), path
}

// exact scans every slot (skipping free ones and, with a filter, other groups).
func (s *snapshot) exact(q []float32, k int, allowed []bool, workers int) *topK {
	nblocks := (s.slots + blockSize - 1) / blockSize
	if workers <= 1 || s.slots*s.dim < parallelFloats || nblocks < 2 {
		t := newTopK(k)
		s.scanBlocks(q, 0, nblocks, allowed, t)
		return t
	}
	workers = min(workers, nblocks)
	parts := make([]*topK, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := nblocks*w/workers, nblocks*(w+1)/workers
		parts[w] = newTopK(k)
		wg.Add(1)
		go func(t *topK) {
			defer wg.Done()
			s.scanBlocks(q, lo, hi, allowed, t)
		}(parts[w])
	}
	wg.Wait()
	t := parts[0]
	for _, o := range parts[1:] {
		t.merge(o)
	}
	return t
}

func (s *snapshot) scanBlocks(q []float32, lo, hi int, allowed []bool, t *topK) {
	dim := s.dim
	for bi := lo; bi < hi; bi++ {
		b := s.blocks[bi]
		n := min(blockSize, s.slots-bi<<blockShift)
		base := int32(bi << blockShift)
		grp := b.grp[:n]
		vecs := b.vecs[:n*dim]
		for i, g := range grp {
			if g < 0 || allowed != nil && !allowed[g] {
				continue
			}
			sc := dot(q, vecs[i*dim:(i+1)*dim])
			if len(t.h) == t.k && sc <= t.h[0].score {
				continue
			}
			t.push(sc, base+int32(i))
		}
	}
}

// searchIndex asks the graph for candidates, drops those that were deleted
// or rewritten since it was built (and, with a filter, those of other
// groups), and merges an exact scan of the slots written since. It returns nil
// when fewer than k hits survive, for the caller to fall back to exact.
func (s *snapshot) searchIndex(q []float32, k, ef int, allowed []bool, selected int) *topK {
	h := s.index
	if ef <= 0 {
		ef = h.efFor(k)
	}
	ef = max(ef, k)
	if allowed != nil && selected < s.live {
		// Post-filter: widen the candidate list by the inverse selectivity.
		ef = min(ef*s.live/selected, max(ef, 2048))
	}
	t := newTopK(k)
	for _, c := range h.search(s, q, ef) {
		b := s.blocks[c.slot>>blockShift]
		i := c.slot & blockMask
		g := b.grp[i]
		if g < 0 || b.ver[i] > h.version || allowed != nil && !allowed[g] {
			continue
		}
		t.push(c.score, c.slot)
	}
	for _, slot := range s.dirty {
		b := s.blocks[slot>>blockShift]
		i := slot & blockMask
		g := b.grp[i]
		if g < 0 || allowed != nil && !allowed[g] {
			continue
		}
		t.push(dot(q, s.vec(slot)), slot)
	}
	if len(t.h) < k {
		return nil
	}
	return t
}

// hits orders the kept candidates: score descending, then id for ties.
func (s *snapshot) hits(t *topK) []Hit {
	out := make([]Hit, len(t.h))
	for i, c := range t.h {
		b := s.blocks[c.slot>>blockShift]
		out[i] = Hit{ID: b.ids[c.slot&blockMask], Score: ClampScore(c.score)}
	}
	slices.SortFunc(out, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}
