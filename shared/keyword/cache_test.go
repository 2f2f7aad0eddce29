package keyword_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// A process's cache notices changes applied by another process (another
// Index on another connection pool) at its next search.
func TestCacheSeesChangesFromAnotherProcess(t *testing.T) {
	t.Parallel()
	pool, ix, url := newIndex(t, keyword.Params{})
	otherPool, err := postgres.Open(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer otherPool.Close()
	other := keyword.New(otherPool, keyword.NewAnalyzer("auto"), keyword.Params{})

	apply(t, otherPool, other, "kb", nil,
		keyword.Doc{ID: "c1", Text: "solar energy"},
		keyword.Doc{ID: "c2", Text: "wind energy"},
	)
	if got := ids(search(t, ix, "kb", "solar", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("first search: %v", got) // loads the cache
	}

	apply(t, otherPool, other, "kb", []string{"c2"}, keyword.Doc{ID: "c3", Text: "solar wind"})
	if got := ids(search(t, ix, "kb", "wind", 10)); !slices.Equal(got, []string{"c3"}) {
		t.Fatalf("after remove+add elsewhere: %v", got)
	}
	apply(t, otherPool, other, "kb", nil, keyword.Doc{ID: "c1", Text: "tidal energy"})
	if got := ids(search(t, ix, "kb", "solar", 10)); !slices.Equal(got, []string{"c3"}) {
		t.Fatalf("after replace elsewhere: %v", got)
	}
	if err := postgres.Tx(context.Background(), otherPool, func(tx pgx.Tx) error {
		return other.DropIndex(context.Background(), tx, "kb")
	}); err != nil {
		t.Fatal(err)
	}
	if got := search(t, ix, "kb", "solar tidal", 10); len(got) != 0 {
		t.Fatalf("after drop elsewhere: %v", got)
	}
	_ = pool
}

// A cache that catches up change by change scores exactly like a cache
// loaded from scratch and like the SQL path, whatever the changes.
func TestCatchingUpMatchesAFreshLoad(t *testing.T) {
	t.Parallel()
	pool, live, _ := newIndex(t, keyword.Params{})
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega 北京 上海 广州 深圳")
	text := func() string {
		n := 1 + rng.IntN(12)
		w := make([]string, n)
		for i := range w {
			w[i] = words[int(math.Sqrt(float64(rng.IntN(len(words)*len(words)))))] // skewed: some words common
		}
		return strings.Join(w, " ")
	}
	queries := []string{"alpha", "omega psi", "beta gamma delta", "北京 深圳", "pi rho sigma tau", "kappa kappa"}
	sqlOnly := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{CacheBytes: 1})

	for step := range 60 {
		var remove []string
		var add []keyword.Doc
		for range rng.IntN(4) {
			remove = append(remove, fmt.Sprintf("d%d", rng.IntN(40)))
		}
		for range rng.IntN(6) {
			add = append(add, keyword.Doc{ID: fmt.Sprintf("d%d", rng.IntN(40)), Text: text()})
		}
		apply(t, pool, live, "kb", remove, add...)
		checkConsistent(t, pool, "kb")
		fresh := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{})
		for _, q := range queries {
			want := search(t, fresh, "kb", q, 50)
			for name, ix := range map[string]*keyword.Index{"caught-up cache": live, "sql": sqlOnly} {
				got := search(t, ix, "kb", q, 50)
				if !sameHits(got, want) {
					t.Fatalf("step %d, query %q: %s = %v, fresh load = %v", step, q, name, got, want)
				}
			}
		}
	}
}

func sameHits(a, b []keyword.Hit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || math.Abs(a[i].Score-b[i].Score) > 1e-9*math.Max(1, math.Abs(b[i].Score)) {
			return false
		}
	}
	return true
}

// Searches and applies from many goroutines and two "processes" at once
// (run with -race); afterwards both caches agree with a fresh load.
func TestConcurrentSearchAndApply(t *testing.T) {
	t.Parallel()
	pool, a, url := newIndex(t, keyword.Params{})
	otherPool, err := postgres.Open(context.Background(), url, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer otherPool.Close()
	b := keyword.New(otherPool, keyword.NewAnalyzer("auto"), keyword.Params{})
	ctx := context.Background()

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix, p := a, pool
			if w%2 == 1 {
				ix, p = b, otherPool
			}
			for i := range 15 {
				id := fmt.Sprintf("w%d-%d", w, i%5)
				err := postgres.Tx(ctx, p, func(tx pgx.Tx) error {
					return ix.Apply(ctx, tx, fmt.Sprintf("kb%d", i%2), []string{fmt.Sprintf("w%d-%d", w, (i+2)%5)},
						[]keyword.Doc{{ID: id, Text: fmt.Sprintf("shared words writer%d item%d", w, i)}})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix := a
			if r%2 == 1 {
				ix = b
			}
			for i := range 40 {
				if _, err := ix.Search(ctx, fmt.Sprintf("kb%d", i%2), "shared writer1 item3", 5, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fresh := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{})
	for _, kb := range []string{"kb0", "kb1"} {
		checkConsistent(t, pool, kb)
		want := search(t, fresh, kb, "shared writer1 item3", 100)
		if len(want) == 0 {
			t.Fatalf("%s is empty", kb)
		}
		for _, ix := range []*keyword.Index{a, b} {
			if got := search(t, ix, kb, "shared writer1 item3", 100); !sameHits(got, want) {
				t.Fatalf("%s: cache %v, fresh %v", kb, got, want)
			}
		}
	}
}

// The allow filter restricts results to accepted documents without changing
// their scores, and still returns k of them when enough match.
func TestAllowFilterRestrictsResults(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	var docs []keyword.Doc
	for i := range 30 {
		docs = append(docs, keyword.Doc{ID: fmt.Sprintf("f%d/c%02d", i%3, i), Text: strings.Repeat("energy ", 1+i%7) + fmt.Sprintf("filler%d", i)})
	}
	apply(t, pool, ix, "kb", nil, docs...)
	all := search(t, ix, "kb", "energy", 100)
	if len(all) != 30 {
		t.Fatalf("unfiltered: %d hits", len(all))
	}
	inFile1 := func(id string) bool { return strings.HasPrefix(id, "f1/") }
	got, err := ix.Search(context.Background(), "kb", "energy", 5, inFile1)
	if err != nil {
		t.Fatal(err)
	}
	var want []keyword.Hit
	for _, h := range all {
		if inFile1(h.ID) && len(want) < 5 {
			want = append(want, h)
		}
	}
	if !sameHits(got, want) {
		t.Fatalf("filtered = %v, want %v", got, want)
	}
	none, err := ix.Search(context.Background(), "kb", "energy", 5, func(string) bool { return false })
	if err != nil || len(none) != 0 {
		t.Fatalf("reject-all filter: %v, %v", none, err)
	}
}
