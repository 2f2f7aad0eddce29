package keyword

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// The cache stays within its budget by evicting the least recently searched
// indexes, and searches stay correct while indexes come and go.
func TestCacheEvictsLeastRecentlyUsedWithinBudget(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	writer := New(pool, NewAnalyzer("auto"), Params{})
	for kb := range 4 {
		var docs []Doc
		for i := range 200 {
			docs = append(docs, Doc{ID: fmt.Sprintf("c%d", i), Text: fmt.Sprintf("common kb%d word%d other%d", kb, i, i%17)})
		}
		if err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
			return writer.Apply(ctx, tx, fmt.Sprintf("kb%d", kb), nil, docs)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Measure one index, then allow about two of them.
	probe := New(pool, NewAnalyzer("auto"), Params{})
	if _, err := probe.Search(ctx, "kb0", "common", 1, nil); err != nil {
		t.Fatal(err)
	}
	one := probe.cache.used
	if one <= 0 {
		t.Fatalf("cache accounts %d bytes for a loaded index", one)
	}
	ix := New(pool, NewAnalyzer("auto"), Params{CacheBytes: 2*one + one/2})
	for round := range 3 {
		for kb := range 4 {
			hits, err := ix.Search(ctx, fmt.Sprintf("kb%d", kb), fmt.Sprintf("kb%d word7", kb), 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 3 || hits[0].ID != "c7" {
				t.Fatalf("round %d kb%d: %v", round, kb, hits)
			}
			ix.cache.mu.Lock()
			used, n := ix.cache.used, ix.cache.lru.Len()
			front := ix.cache.lru.Front().Value.(*entry).indexID
			ix.cache.mu.Unlock()
			if used > ix.cache.budget || n > 2 {
				t.Fatalf("cache holds %d bytes in %d entries, budget %d", used, n, ix.cache.budget)
			}
			if front != fmt.Sprintf("kb%d", kb) {
				t.Fatalf("most recently used = %s, want kb%d", front, kb)
			}
		}
	}
}

// Term vectors round-trip, and corrupt ones are reported.
func TestTermVectorEncoding(t *testing.T) {
	in := []termTF{{"a", 1}, {"北京", 3}, {"zeta", 70000}}
	var out []termTF
	if err := decodeVector(encodeVector(in), func(term []byte, tf int) {
		out = append(out, termTF{string(term), tf})
	}); err != nil {
		t.Fatal(err)
	}
	want := []termTF{{"a", 1}, {"北京", 3}, {"zeta", maxTF}}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("decoded %v, want %v", out, want)
	}
	if err := decodeVector([]byte{5, 'a'}, func([]byte, int) {}); err == nil {
		t.Fatal("truncated vector accepted")
	}
}

// A cache that catches up with a stream of small changes keeps a bounded
// number of segments, and does not reload the whole index to do so.
func TestCatchingUpKeepsSegmentsBounded(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	ix := New(pool, NewAnalyzer("auto"), Params{})
	put := func(docs ...Doc) {
		t.Helper()
		if err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error { return ix.Apply(ctx, tx, "kb", nil, docs) }); err != nil {
			t.Fatal(err)
		}
	}
	var base []Doc
	for i := range 100 {
		base = append(base, Doc{ID: fmt.Sprintf("base%d", i), Text: fmt.Sprintf("base document %d", i)})
	}
	put(base...)
	if _, err := ix.Search(ctx, "kb", "document", 1, nil); err != nil {
		t.Fatal(err)
	}
	first := ix.cache.entry("kb").snap.Load().segs[0]
	for i := range 3 * maxSegments {
		put(Doc{ID: fmt.Sprintf("new%d", i), Text: fmt.Sprintf("fresh document %d", i)})
		hits, err := ix.Search(ctx, "kb", "fresh", 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != i+1 {
			t.Fatalf("after %d additions: %d hits", i+1, len(hits))
		}
		s := ix.cache.entry("kb").snap.Load()
		if len(s.segs) > maxSegments {
			t.Fatalf("%d segments", len(s.segs))
		}
		if s.segs[0] != first {
			t.Fatalf("the first segment was reloaded after %d additions", i+1)
		}
	}
}
