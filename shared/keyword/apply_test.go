package keyword_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

func TestApplyAddsReplacesAndRemoves(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})

	apply(t, pool, ix, "kb", nil,
		keyword.Doc{ID: "c1", Text: "solar panels convert sunlight"}, // 4 terms
		keyword.Doc{ID: "c2", Text: "wind turbines convert wind"},    // 4 terms
	)
	s := checkConsistent(t, pool, "kb")
	if s != (stats{NDocs: 2, TotalLen: 8, NPostings: 7, Version: 1}) {
		t.Fatalf("after add: %+v", s)
	}

	// Re-adding c1 replaces it: its old terms no longer match.
	apply(t, pool, ix, "kb", nil, keyword.Doc{ID: "c1", Text: "hydro dams"})
	s = checkConsistent(t, pool, "kb")
	if s != (stats{NDocs: 2, TotalLen: 6, NPostings: 5, Version: 2}) {
		t.Fatalf("after replace: %+v", s)
	}
	if got := ids(search(t, ix, "kb", "solar", 10)); len(got) != 0 {
		t.Errorf("replaced text still matches: %v", got)
	}
	if got := ids(search(t, ix, "kb", "dams", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("new text: %v", got)
	}

	// Removing an unknown id changes nothing, not even the version.
	apply(t, pool, ix, "kb", []string{"nope"})
	if s2 := checkConsistent(t, pool, "kb"); s2 != s {
		t.Fatalf("removing an unknown id changed the index: %+v → %+v", s, s2)
	}

	// Removed and added in one call: added. Duplicated in add: the last wins.
	apply(t, pool, ix, "kb", []string{"c2", "c3"},
		keyword.Doc{ID: "c3", Text: "first version"},
		keyword.Doc{ID: "c3", Text: "geothermal heat"},
	)
	s = checkConsistent(t, pool, "kb")
	if s != (stats{NDocs: 2, TotalLen: 4, NPostings: 4, Version: 3}) {
		t.Fatalf("after remove+add: %+v", s)
	}
	if got := ids(search(t, ix, "kb", "wind version heat dams", 10)); !slices.Equal(got, []string{"c1", "c3"}) && !slices.Equal(got, []string{"c3", "c1"}) {
		t.Errorf("documents = %v, want c1 and c3", got)
	}

	// Removing everything leaves an empty index.
	apply(t, pool, ix, "kb", []string{"c1", "c3"})
	s = checkConsistent(t, pool, "kb")
	if s != (stats{NDocs: 0, TotalLen: 0, NPostings: 0, Version: 4}) {
		t.Fatalf("after removing all: %+v", s)
	}
	if got := search(t, ix, "kb", "dams heat", 10); len(got) != 0 {
		t.Errorf("empty index returned %v", got)
	}

	// Indexes are independent.
	apply(t, pool, ix, "other", nil, keyword.Doc{ID: "c1", Text: "solar"})
	if got := search(t, ix, "kb", "solar", 10); len(got) != 0 {
		t.Errorf("index kb sees index other: %v", got)
	}
}

func TestApplyRejectsEmptyIDs(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	err := postgres.Tx(context.Background(), pool, func(tx pgx.Tx) error {
		return ix.Apply(context.Background(), tx, "kb", nil, []keyword.Doc{{ID: "", Text: "x"}})
	})
	if err == nil {
		t.Fatal("empty document id accepted")
	}
}

// Apply runs in the caller's transaction: when it rolls back, the index,
// its statistics and every process's search results stay as they were.
func TestRolledBackApplyLeavesTheIndexUnchanged(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	ctx := context.Background()
	apply(t, pool, ix, "kb", nil, keyword.Doc{ID: "c1", Text: "solar energy"})
	before := checkConsistent(t, pool, "kb")
	if got := ids(search(t, ix, "kb", "solar", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("search before: %v", got)
	}

	boom := errors.New("chunk insert failed")
	err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
		if err := ix.Apply(ctx, tx, "kb", []string{"c1"}, []keyword.Doc{{ID: "c2", Text: "wind energy"}}); err != nil {
			return err
		}
		// While the transaction is open, searches see the committed index.
		if got := ids(search(t, ix, "kb", "solar wind", 10)); !slices.Equal(got, []string{"c1"}) {
			t.Errorf("search during the transaction: %v", got)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("tx: %v", err)
	}
	if after := checkConsistent(t, pool, "kb"); after != before {
		t.Fatalf("rolled-back apply changed stats: %+v → %+v", before, after)
	}
	if got := ids(search(t, ix, "kb", "solar wind", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("search after rollback: %v", got)
	}
	fresh := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{})
	if got := ids(search(t, fresh, "kb", "solar wind", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("fresh search after rollback: %v", got)
	}

	// A rolled-back first Apply does not even create the index.
	_ = postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
		if err := ix.Apply(ctx, tx, "new-kb", nil, []keyword.Doc{{ID: "x", Text: "x"}}); err != nil {
			t.Fatal(err)
		}
		return boom
	})
	if s := readStats(t, pool, "new-kb"); s != (stats{}) {
		t.Fatalf("rolled-back index exists: %+v", s)
	}
}

func TestDropIndexRemovesEverything(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	ctx := context.Background()
	apply(t, pool, ix, "kb", nil, keyword.Doc{ID: "c1", Text: "solar energy"}, keyword.Doc{ID: "c2", Text: "wind"})
	apply(t, pool, ix, "kb", []string{"c2"}) // leaves a tombstone
	apply(t, pool, ix, "keep", nil, keyword.Doc{ID: "c1", Text: "solar"})
	if got := search(t, ix, "kb", "solar", 10); len(got) != 1 {
		t.Fatalf("before drop: %v", got)
	}
	for range 2 { // dropping a missing index is fine
		if err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error { return ix.DropIndex(ctx, tx, "kb") }); err != nil {
			t.Fatal(err)
		}
	}
	if got := search(t, ix, "kb", "solar", 10); len(got) != 0 {
		t.Fatalf("dropped index still answers: %v", got)
	}
	var rows int
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM keyword_docs) + (SELECT count(*) FROM keyword_postings)
		+ (SELECT count(*) FROM keyword_deleted) + (SELECT count(*) FROM keyword_indexes)`).Scan(&rows)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1+1+1 { // index "keep": its row, one document, one posting
		t.Fatalf("%d rows left, want only index keep's 3", rows)
	}
	// Recreating the index under the same id starts afresh.
	apply(t, pool, ix, "kb", nil, keyword.Doc{ID: "c9", Text: "tidal"})
	if got := ids(search(t, ix, "kb", "solar tidal", 10)); !slices.Equal(got, []string{"c9"}) {
		t.Fatalf("recreated index: %v", got)
	}
	if got := ids(search(t, ix, "keep", "solar", 10)); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("other index: %v", got)
	}
}

// Many transactions creating the same index at once end up with one index
// holding all their documents, and repeated Applies do not spend index
// numbers (an identity sequence that would eventually run out).
func TestConcurrentFirstAppliesCreateOneIndex(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	ctx := context.Background()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			errs <- postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
				return ix.Apply(ctx, tx, "kb", nil, []keyword.Doc{{ID: fmt.Sprintf("c%d", i), Text: "shared text"}})
			})
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := checkConsistent(t, pool, "kb"); s.NDocs != 8 || s.Version != 8 {
		t.Fatalf("stats %+v, want 8 documents at version 8", s)
	}
	for i := range 5 {
		apply(t, pool, ix, "kb", nil, keyword.Doc{ID: fmt.Sprintf("more%d", i), Text: "x"})
	}
	apply(t, pool, ix, "kb2", nil, keyword.Doc{ID: "c", Text: "x"})
	var first, second int
	if err := pool.QueryRow(ctx, `SELECT (SELECT index_no FROM keyword_indexes WHERE index_id = 'kb'),
		(SELECT index_no FROM keyword_indexes WHERE index_id = 'kb2')`).Scan(&first, &second); err != nil {
		t.Fatal(err)
	}
	if second-first > 8 {
		t.Fatalf("index numbers %d then %d: Applies spend the sequence", first, second)
	}
}
