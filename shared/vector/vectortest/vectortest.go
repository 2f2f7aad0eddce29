// Package vectortest is the contract every vector.Store engine must honour,
// written as tests: run it against an engine with Run.
//
// Each subtest opens a store with open and works in collections of its own
// (random "kb_…" names, dropped at the end), so engines may hand out one
// shared store or a fresh one per call.
//
// Imported by: tests of shared/vector and its engines. May import:
// shared/vector, shared/failure, the standard library.
package vectortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// Run runs the contract against the stores open returns.
func Run(t *testing.T, open func(t *testing.T) vector.Store) {
	t.Run("EnsureCollection", func(t *testing.T) { testEnsure(t, open(t)) })
	t.Run("UpsertReplaces", func(t *testing.T) { testUpsertReplaces(t, open(t)) })
	t.Run("UpsertWrongDimensionWritesNothing", func(t *testing.T) { testUpsertWrongDim(t, open(t)) })
	t.Run("UpsertDuplicateIDsInOneBatch", func(t *testing.T) { testUpsertDuplicates(t, open(t)) })
	t.Run("MissingCollection", func(t *testing.T) { testMissing(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("DeleteGroup", func(t *testing.T) { testDeleteGroup(t, open(t)) })
	t.Run("SearchOrderAndScores", func(t *testing.T) { testOrderAndScores(t, open(t)) })
	t.Run("SearchQueryDimension", func(t *testing.T) { testQueryDim(t, open(t)) })
	t.Run("KLargerThanCollection", func(t *testing.T) { testKLarge(t, open(t)) })
	t.Run("GroupFilters", func(t *testing.T) { testGroups(t, open(t)) })
	t.Run("EmptyCollection", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("NearestAmongMany", func(t *testing.T) { testNearestAmongMany(t, open(t)) })
	t.Run("ConcurrentUpsertsAndSearches", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Drop", func(t *testing.T) { testDrop(t, open(t)) })
}

// Name returns a fresh collection name shaped like a knowledge-base id.
func Name(t testing.TB) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "kb_" + hex.EncodeToString(b)
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newCollection creates a collection that is dropped when t ends.
func newCollection(t testing.TB, s vector.Store, dim int) string {
	t.Helper()
	name := Name(t)
	if err := s.EnsureCollection(ctxFor(t), name, dim); err != nil {
		t.Fatalf("EnsureCollection(%s, %d): %v", name, dim, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.DropCollection(ctx, name)
	})
	return name
}

func upsert(t testing.TB, s vector.Store, name string, items ...vector.Item) {
	t.Helper()
	if err := s.Upsert(ctxFor(t), name, items); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func search(t testing.TB, s vector.Store, name string, q []float32, k int, groups []string) []vector.Hit {
	t.Helper()
	hits, err := s.Search(ctxFor(t), name, q, k, groups)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Fatalf("hits not ordered by descending score: %v", hits)
		}
	}
	for _, h := range hits {
		if h.Score < -1 || h.Score > 1 {
			t.Fatalf("score %v of %s outside [-1, 1]", h.Score, h.ID)
		}
	}
	return hits
}

func ids(hits []vector.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func sortedIDs(hits []vector.Hit) []string {
	out := ids(hits)
	sort.Strings(out)
	return out
}

func item(id, group string, v ...float32) vector.Item {
	return vector.Item{ID: id, Group: group, Vector: v}
}

func wantCode(t testing.TB, err error, sentinel error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got nil", code)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("want errors.Is(err, %s), got %v", code, err)
	}
	if fe, ok := failure.As(err); !ok || fe.Code != code {
		t.Fatalf("want coded error %s, got %v", code, err)
	}
}

func testEnsure(t *testing.T, s vector.Store) {
	ctx := ctxFor(t)
	name := newCollection(t, s, 8)
	if err := s.EnsureCollection(ctx, name, 8); err != nil {
		t.Fatalf("second EnsureCollection with the same dimension: %v", err)
	}
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0, 0, 0, 0, 0))
	if err := s.EnsureCollection(ctx, name, 8); err != nil {
		t.Fatalf("EnsureCollection of a non-empty collection: %v", err)
	}
	if got := search(t, s, name, []float32{1, 0, 0, 0, 0, 0, 0, 0}, 10, nil); len(got) != 1 {
		t.Fatalf("EnsureCollection must keep the vectors, got %v", got)
	}
	err := s.EnsureCollection(ctx, name, 16)
	wantCode(t, err, vector.ErrDimensionMismatch, vector.CodeDimensionMismatch)
	fe, _ := failure.As(err)
	if fe.Kind != failure.KindUnprocessable {
		t.Fatalf("dimension mismatch kind = %v, want unprocessable", fe.Kind)
	}
}

func testUpsertReplaces(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("a", "f1", 1, 0, 0, 0), item("b", "f1", 0, 1, 0, 0))
	upsert(t, s, name, item("a", "f1", 1, 0, 0, 0)) // same write again: idempotent
	q := []float32{1, 0, 0, 0}
	hits := search(t, s, name, q, 10, nil)
	if len(hits) != 2 || hits[0].ID != "a" || math.Abs(hits[0].Score-1) > 1e-4 {
		t.Fatalf("before replace: %v", hits)
	}
	// Rewrite a: new vector and new group.
	upsert(t, s, name, item("a", "f2", 0, 0, 1, 0))
	hits = search(t, s, name, q, 10, nil)
	if len(hits) != 2 {
		t.Fatalf("replace must not duplicate: %v", hits)
	}
	for _, h := range hits {
		if h.ID == "a" && math.Abs(h.Score) > 1e-4 {
			t.Fatalf("a must have its new vector (score 0), got %v", hits)
		}
	}
	if got := ids(search(t, s, name, q, 10, []string{"f1"})); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("group f1 after a moved to f2: %v", got)
	}
	if got := ids(search(t, s, name, q, 10, []string{"f2"})); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("group f2: %v", got)
	}
}

func testUpsertWrongDim(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("keep", "f", 1, 0, 0, 0))
	err := s.Upsert(ctxFor(t), name, []vector.Item{
		item("good", "f", 0, 1, 0, 0),
		item("bad", "f", 1, 2, 3),
	})
	wantCode(t, err, vector.ErrDimensionMismatch, vector.CodeDimensionMismatch)
	if got := sortedIDs(search(t, s, name, []float32{1, 1, 1, 1}, 10, nil)); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("a failed upsert must write nothing, found %v", got)
	}
}

func testUpsertDuplicates(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0), item("a", "g", 0, 1, 0, 0))
	hits := search(t, s, name, []float32{0, 1, 0, 0}, 10, nil)
	if len(hits) != 1 || hits[0].ID != "a" || math.Abs(hits[0].Score-1) > 1e-4 {
		t.Fatalf("the last write of an id in a batch must win: %v", hits)
	}
	if got := search(t, s, name, []float32{0, 1, 0, 0}, 10, []string{"g"}); len(got) != 1 {
		t.Fatalf("the last write's group must win: %v", got)
	}
}

func testMissing(t *testing.T, s vector.Store) {
	ctx := ctxFor(t)
	name := Name(t)
	_, err := s.Search(ctx, name, []float32{1, 0}, 3, nil)
	wantCode(t, err, vector.ErrCollectionNotFound, vector.CodeCollectionNotFound)
	err = s.Upsert(ctx, name, []vector.Item{item("a", "f", 1, 0)})
	wantCode(t, err, vector.ErrCollectionNotFound, vector.CodeCollectionNotFound)
	if err := s.Delete(ctx, name, []string{"a"}); err != nil {
		t.Fatalf("Delete in a missing collection: %v", err)
	}
	if err := s.DeleteGroup(ctx, name, "f"); err != nil {
		t.Fatalf("DeleteGroup in a missing collection: %v", err)
	}
	if err := s.DropCollection(ctx, name); err != nil {
		t.Fatalf("DropCollection of a missing collection: %v", err)
	}
}

func testDelete(t *testing.T, s vector.Store) {
	ctx := ctxFor(t)
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0), item("b", "f", 0, 1, 0, 0), item("c", "g", 0, 0, 1, 0))
	if err := s.Delete(ctx, name, []string{"a", "c", "never-existed"}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := sortedIDs(search(t, s, name, []float32{1, 1, 1, 1}, 10, nil)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after delete: %v", got)
	}
	if err := s.Delete(ctx, name, []string{"a"}); err != nil {
		t.Fatalf("deleting again must succeed: %v", err)
	}
	if err := s.Delete(ctx, name, nil); err != nil {
		t.Fatalf("deleting nothing: %v", err)
	}
	// A deleted id can be written again.
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0))
	if got := sortedIDs(search(t, s, name, []float32{1, 1, 1, 1}, 10, nil)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after re-upsert: %v", got)
	}
}

func testDeleteGroup(t *testing.T, s vector.Store) {
	ctx := ctxFor(t)
	name := newCollection(t, s, 4)
	upsert(t, s, name,
		item("f1_chunk_0", "f1", 1, 0, 0, 0), item("f1_chunk_1", "f1", 1, 1, 0, 0),
		item("f2_chunk_0", "f2", 0, 1, 0, 0), item("f3_chunk_0", "f3", 0, 0, 1, 0))
	if err := s.DeleteGroup(ctx, name, "f1"); err != nil {
		t.Fatalf("DeleteGroup: %v", err)
	}
	if got := sortedIDs(search(t, s, name, []float32{1, 0, 0, 0}, 10, nil)); !slices.Equal(got, []string{"f2_chunk_0", "f3_chunk_0"}) {
		t.Fatalf("after DeleteGroup(f1): %v", got)
	}
	if got := search(t, s, name, []float32{1, 0, 0, 0}, 10, []string{"f1"}); len(got) != 0 {
		t.Fatalf("group f1 must be empty: %v", got)
	}
	if err := s.DeleteGroup(ctx, name, "no-such-file"); err != nil {
		t.Fatalf("DeleteGroup of an unknown group: %v", err)
	}
}

func testOrderAndScores(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name,
		item("same", "f", 2, 0, 0, 0),         // cos 1 (scale does not matter)
		item("near", "f", 3, 1, 0, 0),         // cos 3/√10
		item("diag", "f", 1, 1, 0, 0),         // cos 1/√2
		item("orth", "g", 0, 0, 5, 0),         // cos 0
		item("away", "g", -1, 1, 0, 0),        // cos -1/√2
		item("opposite", "g", -0.5, 0, 0, 0),  // cos -1
		item("mostly-away", "g", -4, 0, 0, 1), // -4/√17, between away and opposite
	)
	hits := search(t, s, name, []float32{0.25, 0, 0, 0}, 10, nil)
	want := []struct {
		id    string
		score float64
	}{
		{"same", 1}, {"near", 3 / math.Sqrt(10)}, {"diag", 1 / math.Sqrt2}, {"orth", 0},
		{"away", -1 / math.Sqrt2}, {"mostly-away", -4 / math.Sqrt(17)}, {"opposite", -1},
	}
	if len(hits) != len(want) {
		t.Fatalf("got %d hits, want %d: %v", len(hits), len(want), hits)
	}
	for i, w := range want {
		if hits[i].ID != w.id || math.Abs(hits[i].Score-w.score) > 1e-4 {
			t.Fatalf("hit %d = %s %.5f, want %s %.5f (all: %v)", i, hits[i].ID, hits[i].Score, w.id, w.score, hits)
		}
	}
	top := search(t, s, name, []float32{1, 0, 0, 0}, 3, nil)
	if got := ids(top); !slices.Equal(got, []string{"same", "near", "diag"}) {
		t.Fatalf("top 3 = %v", got)
	}
}

func testQueryDim(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0))
	_, err := s.Search(ctxFor(t), name, []float32{1, 0, 0}, 3, nil)
	wantCode(t, err, vector.ErrDimensionMismatch, vector.CodeDimensionMismatch)
}

func testKLarge(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 3)
	upsert(t, s, name, item("a", "f", 1, 0, 0), item("b", "f", 0, 1, 0), item("c", "f", 0, 0, 1))
	if got := sortedIDs(search(t, s, name, []float32{1, 1, 0}, 100, nil)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("k=100 over 3 vectors: %v", got)
	}
	if got := search(t, s, name, []float32{1, 1, 0}, 2, nil); len(got) != 2 {
		t.Fatalf("k=2: %v", got)
	}
}

func testGroups(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	upsert(t, s, name,
		item("a0", "fa", 1, 0, 0, 0), item("a1", "fa", 1, 0.1, 0, 0),
		item("b0", "fb", 1, 0.2, 0, 0), item("b1", "fb", 0, 1, 0, 0),
		item("c0", "fc", 1, 0.05, 0, 0))
	q := []float32{1, 0, 0, 0}
	if got := sortedIDs(search(t, s, name, q, 10, nil)); len(got) != 5 {
		t.Fatalf("nil groups must search all: %v", got)
	}
	if got := ids(search(t, s, name, q, 10, []string{"fb"})); !slices.Equal(got, []string{"b0", "b1"}) {
		t.Fatalf("groups [fb]: %v", got)
	}
	if got := ids(search(t, s, name, q, 2, []string{"fa", "fb"})); !slices.Equal(got, []string{"a0", "a1"}) {
		t.Fatalf("groups [fa fb] k=2: %v", got)
	}
	if got := sortedIDs(search(t, s, name, q, 10, []string{"fa", "fc", "missing"})); !slices.Equal(got, []string{"a0", "a1", "c0"}) {
		t.Fatalf("groups [fa fc missing]: %v", got)
	}
	if got := search(t, s, name, q, 10, []string{"missing"}); len(got) != 0 {
		t.Fatalf("unknown group: %v", got)
	}
	if got := search(t, s, name, q, 10, []string{}); len(got) != 0 {
		t.Fatalf("an empty group list matches nothing: %v", got)
	}
	// Group names are data, not syntax.
	odd := `f"1' OR grp != "`
	upsert(t, s, name, item("odd", odd, 1, 0, 0, 0))
	if got := ids(search(t, s, name, q, 10, []string{odd})); !slices.Equal(got, []string{"odd"}) {
		t.Fatalf("group with quotes: %v", got)
	}
}

func testEmpty(t *testing.T, s vector.Store) {
	name := newCollection(t, s, 4)
	hits := search(t, s, name, []float32{1, 0, 0, 0}, 5, nil)
	if len(hits) != 0 {
		t.Fatalf("empty collection: %v", hits)
	}
	hits = search(t, s, name, []float32{1, 0, 0, 0}, 5, []string{"f"})
	if len(hits) != 0 {
		t.Fatalf("empty collection with a filter: %v", hits)
	}
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0))
	if err := s.Delete(ctxFor(t), name, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if hits := search(t, s, name, []float32{1, 0, 0, 0}, 5, nil); len(hits) != 0 {
		t.Fatalf("emptied collection: %v", hits)
	}
}

// RandomVectors returns n reproducible random vectors of dimension dim.
func RandomVectors(seed uint64, n, dim int) [][]float32 {
	r := mrand.New(mrand.NewPCG(seed, 7))
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

func cosine(a, b []float32) float64 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return d / math.Sqrt(na*nb)
}

func testNearestAmongMany(t *testing.T, s vector.Store) {
	const n, dim = 600, 32
	name := newCollection(t, s, dim)
	vecs := RandomVectors(1, n, dim)
	items := make([]vector.Item, n)
	for i, v := range vecs {
		items[i] = vector.Item{ID: fmt.Sprintf("c%03d", i), Group: fmt.Sprintf("f%d", i%7), Vector: v}
	}
	upsert(t, s, name, items...)
	for qi, q := range RandomVectors(2, 5, dim) {
		type sc struct {
			id string
			s  float64
		}
		var all []sc
		for i, v := range vecs {
			all = append(all, sc{items[i].ID, cosine(q, v)})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s })
		hits := search(t, s, name, q, 5, nil)
		if len(hits) != 5 {
			t.Fatalf("query %d: %d hits", qi, len(hits))
		}
		for i, h := range hits {
			if h.ID != all[i].id || math.Abs(h.Score-all[i].s) > 1e-4 {
				t.Fatalf("query %d hit %d = %s %.5f, want %s %.5f", qi, i, h.ID, h.Score, all[i].id, all[i].s)
			}
		}
	}
}

func testConcurrent(t *testing.T, s vector.Store) {
	const writers, batches, batch, dim = 4, 5, 20, 16
	name := newCollection(t, s, dim)
	ctx := ctxFor(t)
	vecs := RandomVectors(3, writers*batches*batch, dim)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				items := make([]vector.Item, batch)
				for i := range items {
					n := (w*batches+b)*batch + i
					items[i] = vector.Item{ID: fmt.Sprintf("w%d-%d", w, n), Group: fmt.Sprintf("w%d", w), Vector: vecs[n]}
				}
				if err := s.Upsert(ctx, name, items); err != nil {
					errs <- fmt.Errorf("upsert: %w", err)
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var groups []string
				if i%2 == 1 {
					groups = []string{fmt.Sprintf("w%d", r)}
				}
				hits, err := s.Search(ctx, name, vecs[i%len(vecs)], 10, groups)
				if err != nil {
					errs <- fmt.Errorf("search: %w", err)
					return
				}
				if len(hits) > 10 {
					errs <- fmt.Errorf("search returned %d hits for k=10", len(hits))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hits := search(t, s, name, vecs[0], len(vecs)+10, nil)
	if len(hits) != len(vecs) {
		t.Fatalf("after concurrent upserts: %d vectors, want %d", len(hits), len(vecs))
	}
	// Every vector is its own nearest neighbour.
	for _, n := range []int{0, 57, len(vecs) - 1} {
		top := search(t, s, name, vecs[n], 1, nil)
		w := n / (batches * batch)
		if want := fmt.Sprintf("w%d-%d", w, n); len(top) != 1 || top[0].ID != want {
			t.Fatalf("nearest to vector %d = %v, want %s", n, top, want)
		}
	}
}

func testDrop(t *testing.T, s vector.Store) {
	ctx := ctxFor(t)
	name := newCollection(t, s, 4)
	upsert(t, s, name, item("a", "f", 1, 0, 0, 0))
	search(t, s, name, []float32{1, 0, 0, 0}, 1, nil)
	if err := s.DropCollection(ctx, name); err != nil {
		t.Fatalf("DropCollection: %v", err)
	}
	_, err := s.Search(ctx, name, []float32{1, 0, 0, 0}, 1, nil)
	wantCode(t, err, vector.ErrCollectionNotFound, vector.CodeCollectionNotFound)
	if err := s.DropCollection(ctx, name); err != nil {
		t.Fatalf("dropping twice: %v", err)
	}
	// The name can be reused, with another dimension, and starts empty.
	if err := s.EnsureCollection(ctx, name, 3); err != nil {
		t.Fatalf("re-create with another dimension: %v", err)
	}
	if hits := search(t, s, name, []float32{1, 0, 0}, 5, nil); len(hits) != 0 {
		t.Fatalf("re-created collection must be empty: %v", hits)
	}
	upsert(t, s, name, item("b", "f", 0, 1, 0))
	if got := ids(search(t, s, name, []float32{0, 1, 0}, 5, nil)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("re-created collection: %v", got)
	}
}
