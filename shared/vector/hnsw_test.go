package vector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randomData returns n vectors with independent normal components: the
// hardest case for a graph (no structure to exploit).
func randomData(seed uint64, n, dim int) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// clusteredData returns n vectors around nc random centres (the same
// centres for the same centreSeed), like chunk embeddings of a few hundred
// documents on a few topics.
func clusteredData(centreSeed, seed uint64, n, dim, nc int, spread float64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	centres := randomData(centreSeed+1000, nc, dim)
	out := make([][]float32, n)
	for i := range out {
		c := centres[r.IntN(nc)]
		v := make([]float32, dim)
		for j := range v {
			v[j] = c[j] + float32(spread*r.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// embeddingLike returns n vectors that lie near a rank-dimensional
// subspace, in clusters, like the embeddings of real text (whose effective
// dimension is far below the model's): v = A·z + noise, z from nc clusters.
// Vectors with the same basisSeed share the subspace and clusters.
func embeddingLike(basisSeed, seed uint64, n, dim, rank, nc int) [][]float32 {
	basis := randomData(basisSeed+2000, rank, dim)
	centres := randomData(basisSeed+3000, nc, rank)
	r := rand.New(rand.NewPCG(seed, 3))
	out := make([][]float32, n)
	z := make([]float32, rank)
	for i := range out {
		c := centres[r.IntN(nc)]
		for j := range z {
			z[j] = c[j] + float32(0.7*r.NormFloat64())
		}
		v := make([]float32, dim)
		for j, zj := range z {
			row := basis[j]
			for d := range v {
				v[d] += zj * row[d]
			}
		}
		for d := range v {
			v[d] += float32(0.5 * r.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// memSnapshot builds a snapshot straight from vectors, as a full load would.
func memSnapshot(vecs [][]float32, groups int) *snapshot {
	s, st := freshSnapshot(1, 1, 1, len(vecs[0]))
	m := newMutator(s, st, 1)
	for i, v := range vecs {
		m.upsert(fmt.Sprintf("c%d", i), fmt.Sprintf("f%d", i%max(groups, 1)), encodeVec(v), 1)
	}
	return m.done()
}

func unit(v []float32) []float32 {
	c := append([]float32(nil), v...)
	normalize(c)
	return c
}

// recall measures the share of the exact top k that the graph search finds.
func recall(s *snapshot, queries [][]float32, k, ef int) float64 {
	found, total := 0, 0
	for _, q := range queries {
		q = unit(q)
		want := map[string]bool{}
		exact, _ := s.search(q, searchParams{k: k})
		for _, h := range exact {
			want[h.ID] = true
		}
		got, path := s.search(q, searchParams{k: k, efSearch: ef, useIndex: true})
		if path != pathIndex {
			panic(fmt.Sprintf("search took path %d, want the graph", path))
		}
		for _, h := range got {
			if want[h.ID] {
				found++
			}
		}
		total += len(exact)
	}
	return float64(found) / float64(total)
}

// TestHNSWRecall builds graphs over random (hard: no structure) and
// clustered data and checks that the calibrated candidate list size reaches
// recall ≥ 0.95 against exact search for queries that are not in the
// collection.
func TestHNSWRecall(t *testing.T) {
	// The race detector makes 20k slow. Much below 15k, a graph over random
	// vectors is rejected as not worth it (TestHNSWUnusableOnHardData).
	n := 20000
	if testing.Short() || raceEnabled {
		n = 15000
	}
	cases := []struct {
		name string
		data [][]float32
		qs   [][]float32
	}{
		{"random-dim64", randomData(1, n, 64), randomData(2, 200, 64)},
		{"clustered-dim128", clusteredData(3, 3, n, 128, 200, 0.6), clusteredData(3, 4, 200, 128, 200, 0.6)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := memSnapshot(c.data, 50)
			h := buildHNSW(nil, s, hnswConfig{m: 16, efConstruction: 100, workers: 2, seed: 1, recall: 0.95})
			if !h.usable {
				t.Fatalf("graph unusable: ef10=%d recall=%.3f visits=%.0f", h.ef10, h.recall, h.visits)
			}
			s = s.withIndex(h)
			for _, k := range []int{10, 50} {
				r := recall(s, c.qs, k, 0)
				t.Logf("n=%d k=%d ef=%d recall=%.4f (calibrated %.4f, %.0f similarities per search)",
					n, k, h.efFor(k), r, h.recall, h.visits)
				if r < 0.95 {
					t.Errorf("recall@%d = %.4f, want ≥ 0.95", k, r)
				}
			}
		})
	}
}

// TestHNSWUnusableOnHardData: on random 256-dimensional vectors a graph
// needs nearly as many similarity computations as the exact scan to reach
// the target recall, so the calibration rejects it and search stays exact.
func TestHNSWUnusableOnHardData(t *testing.T) {
	s := memSnapshot(randomData(11, 4000, 256), 5)
	h := buildHNSW(nil, s, hnswConfig{m: 16, efConstruction: 64, workers: 2, seed: 1, recall: 0.95})
	if h.usable {
		t.Fatalf("graph over random 256-d data accepted: ef10=%d recall=%.3f visits=%.0f of %d",
			h.ef10, h.recall, h.visits, s.live)
	}
	s = s.withIndex(h)
	if _, path := s.search(unit(randomData(12, 1, 256)[0]), searchParams{k: 10, useIndex: true}); path != pathExact {
		t.Fatalf("search path %d, want exact", path)
	}
}

// TestHNSWWithChanges checks the merge of a stale graph with the vectors
// written since: new vectors are found, deleted and rewritten ones are not
// returned from the graph.
func TestHNSWWithChanges(t *testing.T) {
	data := randomData(5, 3000, 32)
	s := memSnapshot(data, 10)
	st := &writeState{idSlot: map[string]int32{}}
	for i := range data {
		st.idSlot[fmt.Sprintf("c%d", i)] = int32(i)
	}
	s = s.withIndex(buildHNSW(nil, s, hnswConfig{m: 12, efConstruction: 64, workers: 2, seed: 2, efSearch: 64}))

	q := unit(randomData(6, 1, 32)[0])
	before, _ := s.search(q, searchParams{k: 3, efSearch: 64, useIndex: true})

	m := newMutator(s, st, 2)
	m.upsert("new", "fnew", encodeVec(q), 2)                            // the exact answer, not in the graph
	m.remove(before[0].ID, 2)                                           // the previous best is gone
	m.upsert(before[1].ID, "f0", encodeVec(randomData(7, 1, 32)[0]), 2) // rewritten elsewhere
	s2 := m.done()
	if s2.stale != 3 {
		t.Fatalf("dirty = %v, want 3 slots", s2.dirty)
	}
	got, path := s2.search(q, searchParams{k: 3, efSearch: 64, useIndex: true})
	if path != pathIndex {
		t.Fatalf("path %d", path)
	}
	if got[0].ID != "new" || math.Abs(got[0].Score-1) > 1e-5 {
		t.Fatalf("top hit = %v, want the new vector with score 1", got)
	}
	for _, h := range got {
		if h.ID == before[0].ID {
			t.Fatalf("deleted %s returned: %v", h.ID, got)
		}
		if h.ID == before[1].ID && math.Abs(h.Score-before[1].Score) < 1e-6 {
			t.Fatalf("rewritten %s returned with its old score: %v", h.ID, got)
		}
	}
	// The old snapshot is untouched (copy-on-write).
	again, _ := s.search(q, searchParams{k: 3, efSearch: 64, useIndex: true})
	for i := range again {
		if again[i] != before[i] {
			t.Fatalf("old snapshot changed: %v, was %v", again, before)
		}
	}
	// A filter keeping a large share goes through the graph and post-filters.
	groups := []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9"}
	hits, path := s2.search(q, searchParams{k: 10, groups: groups, efSearch: 400, useIndex: true})
	if path != pathIndex || len(hits) != 10 {
		t.Fatalf("large filter: path %d, %d hits", path, len(hits))
	}
	exact, _ := s2.search(q, searchParams{k: 10, groups: groups})
	if hits[0] != exact[0] {
		t.Fatalf("large filter top hit %v, exact %v", hits[0], exact[0])
	}
	// A small filter is answered exactly.
	hits, path = s2.search(q, searchParams{k: 10, groups: []string{"fnew", "f3"}, efSearch: 64, useIndex: true})
	if path != pathExactGroups || hits[0].ID != "new" {
		t.Fatalf("small filter: path %d hits %v", path, hits)
	}
}

func TestDot(t *testing.T) {
	for _, d := range []int{1, 3, 7, 8, 9, 31, 32, 33, 64, 100, 256, 1023, 1024, 1536} {
		a, b := randomData(uint64(d), 2, d)[0], randomData(uint64(d), 2, d)[1]
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		for name, f := range map[string]func(a, b []float32) float32{"dot": dot, "generic": dotGeneric} {
			if got := float64(f(a, b)); math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("%s dim %d = %v, want %v", name, d, got, want)
			}
		}
	}
}

// TestExactParallelMatchesSerial checks the split scan against one goroutine.
func TestExactParallelMatchesSerial(t *testing.T) {
	data := randomData(9, 9000, 64) // 9 blocks, above parallelFloats
	s := memSnapshot(data, 4)
	for i, q := range randomData(10, 5, 64) {
		q = unit(q)
		one := s.exact(q, 20, nil, 1)
		many := s.exact(q, 20, nil, 3)
		a, b := s.hits(one), s.hits(many)
		for j := range a {
			if a[j] != b[j] {
				t.Fatalf("query %d: serial %v, parallel %v", i, a, b)
			}
		}
	}
}
