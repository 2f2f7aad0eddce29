package vector_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/vector"
	"github.com/yuxi-serverless/yuxi/shared/vector/vectortest"
)

func openPostgres(t testing.TB, pool *pgxpool.Pool, opts vector.PostgresOptions) *vector.Postgres {
	s := vector.NewPostgres(pool, opts)
	t.Cleanup(s.Close)
	return s
}

func TestPostgresContract(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	s := openPostgres(t, pool, vector.PostgresOptions{})
	vectortest.Run(t, func(t *testing.T) vector.Store { return s })
}

// TestPostgresContractWithGraphs runs the contract with graphs built from 64
// vectors on and rebuilt at once, so the graph, its merge with fresh writes
// and the background builds run under the contract's concurrency. The fixed
// candidate list covers the small collections whole, so results are exact.
func TestPostgresContractWithGraphs(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	s := openPostgres(t, pool, vector.PostgresOptions{
		HNSWThreshold: 64, HNSWEfSearch: 1024, RebuildDelay: time.Millisecond, BuildWorkers: 2,
	})
	vectortest.Run(t, func(t *testing.T) vector.Store { return s })
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func items(prefix string, vecs [][]float32, groups int) []vector.Item {
	out := make([]vector.Item, len(vecs))
	for i, v := range vecs {
		out[i] = vector.Item{ID: fmt.Sprintf("%s%d", prefix, i), Group: fmt.Sprintf("f%d", i%groups), Vector: v}
	}
	return out
}

func hitIDs(hits []vector.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func searchIDs(t testing.TB, s vector.Store, name string, q []float32, k int) []string {
	t.Helper()
	hits, err := s.Search(ctx(t), name, q, k, nil)
	must(t, err)
	return hitIDs(hits)
}

// TestPostgresCacheAcrossProcesses: two stores over two pools of one
// database stand for two processes. Each search sees every write the other
// made before it, whether the copy is caught up by difference or reloaded.
func TestPostgresCacheAcrossProcesses(t *testing.T) {
	poolA, url := pgtest.NewDatabase(t)
	poolB, err := postgres.Open(ctx(t), url, 4)
	must(t, err)
	t.Cleanup(poolB.Close)
	a := openPostgres(t, poolA, vector.PostgresOptions{})
	b := openPostgres(t, poolB, vector.PostgresOptions{})

	const dim = 16
	name := vectortest.Name(t)
	must(t, a.EnsureCollection(ctx(t), name, dim))
	vecs := vectortest.RandomVectors(1, 200, dim)
	must(t, a.Upsert(ctx(t), name, items("c", vecs, 4)))

	q := vectortest.RandomVectors(2, 1, dim)[0]
	if got := searchIDs(t, b, name, q, 300); len(got) != 200 {
		t.Fatalf("B sees %d vectors, want 200", len(got))
	}
	loaded := b.CacheInfo(name)
	if !loaded.Cached || loaded.Vectors != 200 || loaded.Loads != 1 {
		t.Fatalf("B's cache after first search: %+v", loaded)
	}

	// A writes the exact answer; B's next search finds it, by difference.
	must(t, a.Upsert(ctx(t), name, []vector.Item{{ID: "answer", Group: "fx", Vector: q}}))
	hits, err := b.Search(ctx(t), name, q, 1, nil)
	must(t, err)
	if len(hits) != 1 || hits[0].ID != "answer" || math.Abs(hits[0].Score-1) > 1e-5 {
		t.Fatalf("B after A's upsert: %v", hits)
	}
	if info := b.CacheInfo(name); info.Loads != 1 || info.Refreshes != 1 || info.Version <= loaded.Version {
		t.Fatalf("B must catch up by difference: %+v (was %+v)", info, loaded)
	}

	// A rewrites, deletes and deletes a group.
	must(t, a.Upsert(ctx(t), name, []vector.Item{{ID: "answer", Group: "fx", Vector: vecs[0]}}))
	if got := searchIDs(t, b, name, q, 1); got[0] == "answer" {
		t.Fatalf("B still sees the old vector of answer")
	}
	must(t, a.Delete(ctx(t), name, []string{"answer", "c1"}))
	must(t, a.DeleteGroup(ctx(t), name, "f2"))
	got := searchIDs(t, b, name, q, 300)
	if len(got) != 200-1-50 || slices.Contains(got, "answer") || slices.Contains(got, "c1") || slices.Contains(got, "c2") {
		t.Fatalf("B after deletes: %d vectors %v", len(got), got)
	}
	// Writes through B are visible to A's cache too.
	searchIDs(t, a, name, q, 1)
	must(t, b.Upsert(ctx(t), name, []vector.Item{{ID: "from-b", Group: "fb", Vector: q}}))
	if got := searchIDs(t, a, name, q, 1); got[0] != "from-b" {
		t.Fatalf("A after B's upsert: %v", got)
	}

	// A drops and re-creates the collection with another dimension: B's copy
	// belongs to the old incarnation and is reloaded.
	must(t, a.DropCollection(ctx(t), name))
	must(t, a.EnsureCollection(ctx(t), name, 3))
	must(t, a.Upsert(ctx(t), name, []vector.Item{{ID: "new", Group: "g", Vector: []float32{1, 0, 0}}}))
	if got := searchIDs(t, b, name, []float32{1, 0, 0}, 10); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("B after drop and re-create: %v", got)
	}
	if info := b.CacheInfo(name); info.Vectors != 1 {
		t.Fatalf("B's cache after re-create: %+v", info)
	}
}

// TestPostgresTombstonePurge: when the tombstones a stale copy would need
// were purged, the copy is reloaded whole instead of missing a deletion.
func TestPostgresTombstonePurge(t *testing.T) {
	poolA, url := pgtest.NewDatabase(t)
	poolB, err := postgres.Open(ctx(t), url, 4)
	must(t, err)
	t.Cleanup(poolB.Close)
	a := openPostgres(t, poolA, vector.PostgresOptions{TombstoneTTL: time.Hour})
	b := openPostgres(t, poolB, vector.PostgresOptions{})

	name := vectortest.Name(t)
	must(t, a.EnsureCollection(ctx(t), name, 4))
	must(t, a.Upsert(ctx(t), name, items("c", vectortest.RandomVectors(3, 10, 4), 2)))
	q := []float32{1, 0, 0, 0}
	searchIDs(t, b, name, q, 10) // B's copy: 10 vectors

	must(t, a.Delete(ctx(t), name, []string{"c1"}))
	// c1's tombstone outlives its TTL (its clock moved back rather than slept through).
	_, err = poolA.Exec(ctx(t), `UPDATE vector_tombstones SET deleted_at = now() - interval '2 hours' WHERE collection = $1 AND id = 'c1'`, name)
	must(t, err)
	must(t, a.Delete(ctx(t), name, []string{"c2"})) // purges c1's tombstone
	var tombstones int
	must(t, poolA.QueryRow(ctx(t), `SELECT count(*) FROM vector_tombstones WHERE collection = $1`, name).Scan(&tombstones))
	if tombstones != 1 {
		t.Fatalf("tombstones = %d, want 1 (c1's purged)", tombstones)
	}
	got := searchIDs(t, b, name, q, 10)
	sort.Strings(got)
	if len(got) != 8 || slices.Contains(got, "c1") || slices.Contains(got, "c2") {
		t.Fatalf("B after purge: %v", got)
	}
	if info := b.CacheInfo(name); info.Loads != 2 {
		t.Fatalf("B must have reloaded whole: %+v", info)
	}
}

// TestPostgresCacheLRU: past MaxCacheBytes the least recently searched
// collection leaves the cache, and is loaded again when searched.
func TestPostgresCacheLRU(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	const dim = 64
	// One collection of 1500 vectors takes two 1024-slot blocks (~0.6 MB).
	s := openPostgres(t, pool, vector.PostgresOptions{MaxCacheBytes: 1 << 20})
	var names []string
	for i := range 3 {
		n := vectortest.Name(t)
		must(t, s.EnsureCollection(ctx(t), n, dim))
		must(t, s.Upsert(ctx(t), n, items("c", vectortest.RandomVectors(uint64(i), 1500, dim), 3)))
		names = append(names, n)
	}
	q := vectortest.RandomVectors(9, 1, dim)[0]
	searchIDs(t, s, names[0], q, 5)
	searchIDs(t, s, names[1], q, 5)
	if !s.CacheInfo(names[1]).Cached || s.CacheInfo(names[0]).Cached {
		t.Fatalf("after searching 0 then 1 under a 1 MiB cap: 0 %+v, 1 %+v",
			s.CacheInfo(names[0]), s.CacheInfo(names[1]))
	}
	if b := s.CacheBytes(); b > 1<<20 {
		t.Fatalf("cache holds %d bytes, cap %d", b, 1<<20)
	}
	want := searchIDs(t, s, names[2], q, 5)
	if got := searchIDs(t, s, names[2], q, 5); !slices.Equal(got, want) {
		t.Fatalf("results changed across cache hits: %v vs %v", got, want)
	}
	if got := searchIDs(t, s, names[0], q, 1500); len(got) != 1500 {
		t.Fatalf("evicted collection reloaded with %d vectors", len(got))
	}
}

// waitIndex searches until the collection's graph is current (searches are
// what start builds).
func waitIndex(t testing.TB, s *vector.Postgres, name string, q []float32, ok func(vector.CacheInfo) bool) vector.CacheInfo {
	t.Helper()
	// A hang guard, not a speed check: a 20k-vector build under -race on a
	// loaded 2-core machine took over 2 minutes (CI, stop 20).
	deadline := time.Now().Add(6 * time.Minute)
	for {
		_, err := s.Search(ctx(t), name, q, 1, nil)
		must(t, err)
		info := s.CacheInfo(name)
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("graph not ready: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresBackgroundRebuild follows a graph through writes: fresh
// vectors are found at once (searched exactly beside the graph), deleted ones
// vanish at once, and the graph is rebuilt in the background once the
// collection is quiet.
func TestPostgresBackgroundRebuild(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	const dim, n = 32, 3000
	s := openPostgres(t, pool, vector.PostgresOptions{
		HNSWThreshold: 1000, RebuildDelay: 300 * time.Millisecond, BuildWorkers: 2,
	})
	name := vectortest.Name(t)
	must(t, s.EnsureCollection(ctx(t), name, dim))
	vecs := vectortest.RandomVectors(4, n, dim)
	must(t, s.Upsert(ctx(t), name, items("c", vecs, 10)))

	q := vectortest.RandomVectors(5, 1, dim)[0]
	first := s.CacheInfo(name)
	if first.Cached {
		t.Fatalf("cached before any search: %+v", first)
	}
	built := waitIndex(t, s, name, q, func(i vector.CacheInfo) bool { return i.Indexed && !i.Building })
	if !built.IndexUsable || built.IndexVersion != built.Version || built.IndexStale != 0 {
		t.Fatalf("graph after build: %+v", built)
	}

	// Fresh write: found at once, before any rebuild.
	must(t, s.Upsert(ctx(t), name, []vector.Item{{ID: "fresh", Group: "fz", Vector: q}}))
	hits, err := s.Search(ctx(t), name, q, 3, nil)
	must(t, err)
	if hits[0].ID != "fresh" || math.Abs(hits[0].Score-1) > 1e-5 {
		t.Fatalf("fresh vector not first: %v", hits)
	}
	stale := s.CacheInfo(name)
	if stale.IndexVersion != built.IndexVersion || stale.IndexStale != 1 {
		t.Fatalf("right after a write the old graph must serve with 1 stale slot: %+v", stale)
	}
	// Deleted vectors vanish at once too.
	second := hits[1].ID
	must(t, s.Delete(ctx(t), name, []string{"fresh", second}))
	hits, err = s.Search(ctx(t), name, q, 3, nil)
	must(t, err)
	if slices.Contains(hitIDs(hits), "fresh") || slices.Contains(hitIDs(hits), second) {
		t.Fatalf("deleted vectors returned: %v", hits)
	}

	// Once the collection has been quiet for RebuildDelay, a search starts a
	// rebuild: waitIndex keeps searching until that state is reached.
	rebuilt := waitIndex(t, s, name, q, func(i vector.CacheInfo) bool {
		return i.IndexVersion > built.IndexVersion && !i.Building
	})
	if rebuilt.IndexStale != 0 || rebuilt.IndexVersion != rebuilt.Version || rebuilt.Vectors != n-1 {
		t.Fatalf("after rebuild: %+v", rebuilt)
	}
}

// exactTop is the brute-force answer, for checks.
func exactTop(vecs [][]float32, q []float32, k int) []vector.Hit {
	hits := make([]vector.Hit, len(vecs))
	for i, v := range vecs {
		var d, nv, nq float64
		for j := range v {
			d += float64(v[j]) * float64(q[j])
			nv += float64(v[j]) * float64(v[j])
			nq += float64(q[j]) * float64(q[j])
		}
		hits[i] = vector.Hit{ID: fmt.Sprintf("c%d", i), Score: d / math.Sqrt(nv*nq)}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	return hits[:k]
}

// TestPostgresHNSWRecall: 20k random 64-dimensional vectors (no structure:
// the hard case) through the store, at the default threshold. Once the graph
// is built, recall@10 against brute force stays ≥ 0.95.
func TestPostgresHNSWRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 20k-vector graph")
	}
	pool, _ := pgtest.NewDatabase(t)
	const dim, n, k = 64, 20000, 10
	s := openPostgres(t, pool, vector.PostgresOptions{BuildWorkers: 2})
	name := vectortest.Name(t)
	must(t, s.EnsureCollection(ctx(t), name, dim))
	vecs := vectortest.RandomVectors(6, n, dim)
	must(t, s.Upsert(ctx(t), name, items("c", vecs, 100)))

	queries := vectortest.RandomVectors(7, 100, dim)
	info := waitIndex(t, s, name, queries[0], func(i vector.CacheInfo) bool { return i.Indexed && !i.Building })
	if !info.IndexUsable {
		t.Fatalf("graph over 20k random 64-d vectors rejected: %+v", info)
	}
	found := 0
	for _, q := range queries {
		want := map[string]bool{}
		for _, h := range exactTop(vecs, q, k) {
			want[h.ID] = true
		}
		for _, id := range searchIDs(t, s, name, q, k) {
			if want[id] {
				found++
			}
		}
	}
	r := float64(found) / float64(len(queries)*k)
	t.Logf("recall@%d = %.4f over %d queries (graph ef %d)", k, r, len(queries), info.IndexEf)
	if r < 0.95 {
		t.Fatalf("recall@%d = %.4f, want ≥ 0.95", k, r)
	}
}
