package graph

import (
	"math"
	"sort"
)

// Personalized PageRank over a subgraph, for graph retrieval.
//
// The algorithm is PageRank (Page, Brin, Motwani, Winograd, "The PageRank
// Citation Ranking: Bringing Order to the Web", 1999) with the uniform
// teleport vector replaced by a personalization vector over seed entities
// (Haveliwala, "Topic-Sensitive PageRank", WWW 2002; Jeh and Widom,
// "Scaling Personalized Web Search", WWW 2003), as HippoRAG (Gutiérrez et
// al., NeurIPS 2024) uses it to rank passages by the PageRank mass of the
// entities they mention. Computed by power iteration:
//
//	r ← (1−α)·p + α·(Wᵀ r + d(r)·p)
//
// where α is the damping (the probability of following an edge), p the
// normalized personalization, W the row-normalized adjacency (relations
// taken in both directions, parallel edges adding weight) and d(r) the mass
// on dangling nodes (no edges), which teleports back to the seeds so that
// the total stays 1.

// PPROptions tune PersonalizedPageRank; zero fields take the defaults.
type PPROptions struct {
	Damping    float64 // α, in (0,1); default 0.85
	Iterations int     // at most; default 100
	Tolerance  float64 // stop when the L1 change is below; default 1e-9
}

// PersonalizedPageRank ranks the entities of sg from seeds (entity id →
// weight ≥ 0; seeds not in sg are ignored). The result maps every entity of
// sg to its score; scores sum to 1. With no usable seed it returns nil.
func PersonalizedPageRank(sg Subgraph, seeds map[string]float64, opt PPROptions) map[string]float64 {
	ids, r := pageRank(sg, seeds, opt)
	if r == nil {
		return nil
	}
	out := make(map[string]float64, len(ids))
	for i, id := range ids {
		out[id] = r[i]
	}
	return out
}

// pageRank is PersonalizedPageRank as slices: the entities of sg in order
// (each once) and their scores (nil with no usable seed).
func pageRank(sg Subgraph, seeds map[string]float64, opt PPROptions) ([]string, []float64) {
	if opt.Damping <= 0 || opt.Damping >= 1 {
		opt.Damping = 0.85
	}
	if opt.Iterations <= 0 {
		opt.Iterations = 100
	}
	if opt.Tolerance <= 0 {
		opt.Tolerance = 1e-9
	}
	idx := make(map[string]int32, len(sg.Entities))
	ids := make([]string, 0, len(sg.Entities))
	for _, e := range sg.Entities {
		if _, ok := idx[e.ID]; !ok {
			idx[e.ID] = int32(len(ids))
			ids = append(ids, e.ID)
		}
	}
	n := len(ids)
	p := make([]float64, n)
	for id, w := range seeds {
		if i, ok := idx[id]; ok && w > 0 {
			p[i] += w
		}
	}
	// Summed in the subgraph's order, not the map's: the scores must not
	// depend on map iteration (retrieval orders tied chunks by them).
	total := 0.0
	for _, w := range p {
		total += w
	}
	if total == 0 {
		return ids, nil
	}
	for i := range p {
		p[i] /= total
	}
	// The adjacency in compressed rows: node i's neighbours are
	// nbr[start[i]:start[i+1]], in the order of sg.Relations.
	ends := make([][2]int32, 0, len(sg.Relations))
	start := make([]int32, n+1)
	for _, r := range sg.Relations {
		s, ok1 := idx[r.Source]
		t, ok2 := idx[r.Target]
		if !ok1 || !ok2 || s == t {
			continue
		}
		ends = append(ends, [2]int32{s, t})
		start[s+1]++
		start[t+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	nbr := make([]int32, start[n])
	fill := append([]int32(nil), start[:n]...)
	for _, e := range ends {
		nbr[fill[e[0]]] = e[1]
		fill[e[0]]++
		nbr[fill[e[1]]] = e[0]
		fill[e[1]]++
	}
	r := append([]float64(nil), p...)
	next := make([]float64, n)
	for it := 0; it < opt.Iterations; it++ {
		dangling := 0.0
		for i := range next {
			next[i] = 0
		}
		for i := 0; i < n; i++ {
			out := nbr[start[i]:start[i+1]]
			if len(out) == 0 {
				dangling += r[i]
				continue
			}
			share := r[i] / float64(len(out))
			for _, j := range out {
				next[j] += share
			}
		}
		diff := 0.0
		for i := range next {
			v := (1-opt.Damping)*p[i] + opt.Damping*(next[i]+dangling*p[i])
			diff += math.Abs(v - r[i])
			next[i] = v
		}
		r, next = next, r
		if diff < opt.Tolerance {
			break
		}
	}
	return ids, r
}

// ScoredChunk is a chunk with a score.
type ScoredChunk struct {
	ChunkID string
	Score   float64
}

// RankChunks scores chunks by the PageRank mass of the entities they
// mention (mentions: entity id → chunk ids), highest first (ties by id),
// at most limit (0: all).
func RankChunks(scores map[string]float64, mentions map[string][]string, limit int) []ScoredChunk {
	acc := map[string]float64{}
	for ent, chunks := range mentions {
		s := scores[ent]
		if s <= 0 {
			continue
		}
		for _, c := range chunks {
			acc[c] += s
		}
	}
	out := make([]ScoredChunk, 0, len(acc))
	for c, s := range acc {
		out = append(out, ScoredChunk{ChunkID: c, Score: s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ChunkID < out[j].ChunkID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// FuseRRF fuses ranked lists by Reciprocal Rank Fusion (Cormack, Clarke and
// Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
// Rank Learning Methods", SIGIR 2009), as the original fuses graph chunks
// with the base results: score(d) = Σ weight_l / (k + rank_l(d)), ranks
// from 1, k = 60. lists[i] is weighted by weights[i] (missing: 1).
func FuseRRF(lists [][]string, weights []float64, k float64) []ScoredChunk {
	if k <= 0 {
		k = 60
	}
	acc := map[string]float64{}
	first := map[string]int{}
	order := 0
	for li, l := range lists {
		w := 1.0
		if li < len(weights) {
			w = weights[li]
		}
		for rank, id := range l {
			if _, ok := first[id]; !ok {
				first[id] = order
				order++
			}
			acc[id] += w / (k + float64(rank+1))
		}
	}
	out := make([]ScoredChunk, 0, len(acc))
	for id, s := range acc {
		out = append(out, ScoredChunk{ChunkID: id, Score: s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return first[out[i].ChunkID] < first[out[j].ChunkID]
	})
	return out
}
