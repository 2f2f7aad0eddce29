package vector

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// hnsw is a Hierarchical Navigable Small World graph (Malkov & Yashunin,
// 2016) over the slots of a snapshot, with similarity = dot product of unit
// vectors. It is built once, in the background, by several goroutines (each
// node's links guarded by its own mutex, as in hnswlib); after the build it is
// immutable and searched without locks.
type hnsw struct {
	layout  uint64 // the snapshot layout whose slots the graph addresses
	version int64  // the snapshot version it was built from
	m, m0   int    // links per node on upper levels / on level 0
	efC     int

	entry    int32
	maxLevel int
	levels   []int8      // per slot; -1: not in the graph (free), heldOut
	heldOut  []int32     // live slots left out of the graph (searched exactly)
	links0   []int32     // level 0: m0 links per slot, flat
	n0       []uint8     // level 0: links in use per slot
	upper    [][][]int32 // upper[slot][l-1]: links on level l ≥ 1
	nodes    int
	bytes    int64

	// Search settings, fixed or found by calibrate: the candidate list
	// sizes for k = 10 and k = 50, and whether the graph is worth using at all.
	ef10, ef50 int
	usable     bool
	recall     float64 // measured recall@10 at ef10 (0 when fixed)
	visits     float64 // mean similarity computations per search at ef10

	mu    sync.Mutex   // entry and maxLevel, during the build
	locks []sync.Mutex // per-slot link locks, during the build only

	pool sync.Pool // *hnswWorker for searches
}

type hnswConfig struct {
	m              int
	efConstruction int
	workers        int
	seed           uint64
	efSearch       int     // fixed candidate list size; 0: calibrate
	recall         float64 // calibration target
}

const maxHNSWLevel = 16

// hnswWorker holds one goroutine's scratch space.
type hnswWorker struct {
	visited []uint16
	gen     uint16
	dists   int // similarity computations, for calibration
	cands   candHeap
	res     *topK
	buf     []int32
	sel     []cand
}

func (h *hnsw) newWorker() *hnswWorker {
	return &hnswWorker{visited: make([]uint16, len(h.levels)), buf: make([]int32, h.m0)}
}

func (w *hnswWorker) reset() {
	w.gen++
	if w.gen == 0 {
		clear(w.visited)
		w.gen = 1
	}
}

// buildHNSW indexes the live slots of s. It stops early, returning nil, when
// stop is closed (the store is closing).
func buildHNSW(stop <-chan struct{}, s *snapshot, cfg hnswConfig) *hnsw {
	n := s.slots
	m := max(cfg.m, 4)
	h := &hnsw{
		layout: s.layout, version: s.version, m: m, m0: 2 * m, efC: max(cfg.efConstruction, m),
		entry: -1, maxLevel: -1,
		levels: make([]int8, n),
		links0: make([]int32, n*2*m),
		n0:     make([]uint8, n),
		upper:  make([][][]int32, n),
		locks:  make([]sync.Mutex, n),
	}
	rng := rand.New(rand.NewPCG(cfg.seed, uint64(n)))
	ml := 1 / math.Log(float64(m))
	// The calibration queries are held out of the graph: a stored vector's
	// own links lead straight to its neighbours, which would overstate the
	// recall real queries get. Held-out slots are searched exactly, like
	// slots written after the build.
	calibrating := cfg.efSearch <= 0 && s.live >= minCalibrationNodes
	if calibrating {
		for tries := 0; len(h.heldOut) < calibrationQueries && tries < 20*calibrationQueries; tries++ {
			slot := int32(rng.IntN(n))
			if s.blocks[slot>>blockShift].grp[slot&blockMask] >= 0 && h.levels[slot] != heldOut {
				h.levels[slot] = heldOut
				h.heldOut = append(h.heldOut, slot)
			}
		}
	}
	order := make([]int32, 0, s.live)
	for bi, b := range s.blocks {
		// Only up to s.slots: a newer snapshot may be appending past it.
		for i, g := range b.grp[:max(0, min(blockSize, n-bi<<blockShift))] {
			slot := bi<<blockShift + i
			if h.levels[slot] == heldOut {
				continue
			}
			if g < 0 {
				h.levels[slot] = -1
				continue
			}
			l := min(int(-math.Log(1-rng.Float64())*ml), maxHNSWLevel)
			h.levels[slot] = int8(l)
			if l > 0 {
				h.upper[slot] = make([][]int32, l)
			}
			order = append(order, int32(slot))
		}
	}
	h.nodes = len(order)
	if len(order) == 0 {
		return nil
	}
	// Insert in a shuffled order: slots are in write order, which groups a
	// file's chunks; a random order gives the graph its small-world links.
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	h.entry, h.maxLevel = order[0], int(h.levels[order[0]])

	var next atomic.Int64
	next.Store(1)
	workers := max(cfg.workers, 1)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := h.newWorker()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(order) {
					return
				}
				if i&255 == 0 && stopped(stop) {
					return
				}
				h.insert(s, w, order[i])
			}
		}()
	}
	wg.Wait()
	if stopped(stop) {
		return nil
	}
	h.locks = nil
	h.bytes = int64(len(h.links0))*4 + int64(n)*(1+1+24)
	for _, u := range h.upper {
		for _, l := range u {
			h.bytes += int64(cap(l))*4 + 24
		}
	}
	h.pool.New = func() any { return h.newWorker() }
	switch {
	case cfg.efSearch > 0:
		h.ef10, h.ef50, h.usable = cfg.efSearch, cfg.efSearch, true
	case calibrating:
		h.calibrate(s, cfg.recall)
	default:
		// Too small to measure; a graph this small is never worth it anyway
		// (thresholds are far larger outside tests).
		h.ef10, h.ef50, h.usable = 64, 128, true
	}
	return h
}

// heldOut marks, in levels, a live slot left out of the graph for calibration.
const heldOut = -2

// neighbors returns the links of slot on level l, copied into buf while
// building (other goroutines may be rewriting them).
func (h *hnsw) neighbors(slot int32, l int, buf []int32) []int32 {
	if h.locks == nil {
		if l == 0 {
			off := int(slot) * h.m0
			return h.links0[off : off+int(h.n0[slot])]
		}
		return h.upper[slot][l-1]
	}
	mu := &h.locks[slot]
	mu.Lock()
	var src []int32
	if l == 0 {
		off := int(slot) * h.m0
		src = h.links0[off : off+int(h.n0[slot])]
	} else {
		src = h.upper[slot][l-1]
	}
	buf = append(buf[:0], src...)
	mu.Unlock()
	return buf
}

func (h *hnsw) setLinks(slot int32, l int, links []cand) {
	if l == 0 {
		off := int(slot) * h.m0
		for i, c := range links {
			h.links0[off+i] = c.slot
		}
		h.n0[slot] = uint8(len(links))
		return
	}
	u := h.upper[slot][l-1][:0]
	if u == nil {
		u = make([]int32, 0, h.m)
	}
	for _, c := range links {
		u = append(u, c.slot)
	}
	h.upper[slot][l-1] = u
}

func (h *hnsw) insert(s *snapshot, w *hnswWorker, x int32) {
	q := s.vec(x)
	lvl := int(h.levels[x])

	h.mu.Lock()
	entry, maxL := h.entry, h.maxLevel
	holding := lvl > maxL // a new top node keeps the lock until it becomes the entry
	if !holding {
		h.mu.Unlock()
	}

	cur := cand{dot(q, s.vec(entry)), entry}
	for l := maxL; l > lvl; l-- {
		cur = h.greedy(s, w, q, cur, l)
	}
	eps := []cand{cur}
	for l := min(lvl, maxL); l >= 0; l-- {
		found := h.searchLayer(s, w, q, eps, h.efC, l)
		eps = slices.Clone(found)
		mmax := h.m
		if l == 0 {
			mmax = h.m0
		}
		sel := h.selectNeighbors(s, found, h.m, w.sel[:0])
		w.sel = sel
		h.locks[x].Lock()
		h.setLinks(x, l, sel)
		h.locks[x].Unlock()
		for _, c := range sel {
			h.addLink(s, c.slot, x, c.score, l, mmax)
		}
	}
	if holding {
		h.entry, h.maxLevel = x, lvl
		h.mu.Unlock()
	}
}

// greedy walks level l towards q, one best neighbour at a time.
func (h *hnsw) greedy(s *snapshot, w *hnswWorker, q []float32, cur cand, l int) cand {
	for changed := true; changed; {
		changed = false
		for _, nb := range h.neighbors(cur.slot, l, w.buf) {
			if sc := dot(q, s.vec(nb)); sc > cur.score {
				cur = cand{sc, nb}
				changed = true
			}
		}
	}
	return cur
}

// searchLayer is the beam search of level l from the entry points eps,
// keeping the ef best; it returns them best first (in w's scratch space).
func (h *hnsw) searchLayer(s *snapshot, w *hnswWorker, q []float32, eps []cand, ef, l int) []cand {
	w.reset()
	w.cands = w.cands[:0]
	if w.res == nil || w.res.k != ef {
		w.res = newTopK(ef)
	}
	res := w.res
	res.h = res.h[:0]
	for _, e := range eps {
		if w.visited[e.slot] == w.gen {
			continue
		}
		w.visited[e.slot] = w.gen
		w.cands.push(e)
		res.push(e.score, e.slot)
	}
	for len(w.cands) > 0 {
		c := w.cands.pop()
		if res.full() && c.score < res.min() {
			break
		}
		for _, nb := range h.neighbors(c.slot, l, w.buf) {
			if w.visited[nb] == w.gen {
				continue
			}
			w.visited[nb] = w.gen
			sc := dot(q, s.vec(nb))
			w.dists++
			if !res.full() || sc > res.min() {
				w.cands.push(cand{sc, nb})
				res.push(sc, nb)
			}
		}
	}
	sortCands(res.h)
	return res.h
}

// selectNeighbors is the heuristic of the paper (algorithm 4, as in hnswlib):
// walking candidates best first, keep one only if it is nearer to the base
// than to every neighbour already kept, so links spread in all directions.
func (h *hnsw) selectNeighbors(s *snapshot, cands []cand, m int, out []cand) []cand {
	out = out[:0]
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		cv := s.vec(c.slot)
		good := true
		for _, r := range out {
			if dot(cv, s.vec(r.slot)) > c.score {
				good = false
				break
			}
		}
		if good {
			out = append(out, c)
		}
	}
	return out
}

// addLink adds the reverse link n → x on level l, pruning n's links with the
// heuristic when they overflow mmax.
func (h *hnsw) addLink(s *snapshot, n, x int32, sim float32, l, mmax int) {
	mu := &h.locks[n]
	mu.Lock()
	defer mu.Unlock()
	var cur []int32
	if l == 0 {
		off := int(n) * h.m0
		cur = h.links0[off : off+int(h.n0[n])]
	} else {
		cur = h.upper[n][l-1]
	}
	if len(cur) < mmax {
		if l == 0 {
			h.links0[int(n)*h.m0+len(cur)] = x
			h.n0[n]++
		} else {
			if cur == nil {
				cur = make([]int32, 0, h.m)
			}
			h.upper[n][l-1] = append(cur, x)
		}
		return
	}
	nv := s.vec(n)
	cs := make([]cand, 0, len(cur)+1)
	cs = append(cs, cand{sim, x})
	for _, y := range cur {
		cs = append(cs, cand{dot(nv, s.vec(y)), y})
	}
	sortCands(cs)
	sel := h.selectNeighbors(s, cs, mmax, make([]cand, 0, mmax))
	h.setLinks(n, l, sel)
}

// search returns up to ef candidates near q, best first. s must have the
// graph's layout (it may be newer: slots added since are not in the graph).
func (h *hnsw) search(s *snapshot, q []float32, ef int) []cand {
	w := h.pool.Get().(*hnswWorker)
	defer h.pool.Put(w)
	return slices.Clone(h.searchWith(s, w, q, ef))
}

// searchWith is search in w's scratch space (valid until w's next use).
func (h *hnsw) searchWith(s *snapshot, w *hnswWorker, q []float32, ef int) []cand {
	cur := cand{dot(q, s.vec(h.entry)), h.entry}
	for l := h.maxLevel; l > 0; l-- {
		cur = h.greedy(s, w, q, cur, l)
	}
	return h.searchLayer(s, w, q, []cand{cur}, ef, 0)
}

// candHeap is a max-heap on score: the next candidate to expand.
type candHeap []cand

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].score >= a[i].score {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *candHeap) pop() cand {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(a) {
			break
		}
		m := l
		if r := l + 1; r < len(a) && a[r].score > a[l].score {
			m = r
		}
		if a[i].score >= a[m].score {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
