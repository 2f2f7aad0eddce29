package keyword_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM keyword_docs) + (SELECT count(*) FROM keyword_blocks)
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

// Postings are stored as one block per (term, Apply). A batch analysed in
// parallel and stored as blocks answers exactly as the same documents added
// one at a time; removing documents rewrites their blocks without them and
// deletes the blocks left empty, so a removed file leaves no postings.
func TestPostingBlocksMatchOneByOneAndEmptyOnRemoval(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	sqlOnly := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{CacheBytes: 1})
	words := strings.Fields("river bank money flow water loan interest rate stream current account deposit 北京 上海")
	var docs []keyword.Doc
	for i := range 300 { // enough for several analysis workers
		var w []string
		for j := range 1 + i%7 {
			w = append(w, words[(i*(j+3)+j*j)%len(words)])
		}
		docs = append(docs, keyword.Doc{ID: fmt.Sprintf("d%03d", i), Text: strings.Join(w, " ")})
	}
	apply(t, pool, ix, "batch", nil, docs...)
	for _, d := range docs {
		apply(t, pool, ix, "single", nil, d)
	}
	checkConsistent(t, pool, "batch")
	checkConsistent(t, pool, "single")
	blocks := func(indexID string) (n int) {
		t.Helper()
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM keyword_blocks b
			JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1`, indexID).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	distinct := map[string]bool{}
	for _, term := range ix.Analyzer().Terms(strings.Join(words, " ")) {
		distinct[term] = true
	}
	if b := blocks("batch"); b != len(distinct) {
		t.Fatalf("one batch of %d distinct terms stored %d blocks", len(distinct), b)
	}
	same := func(what string) {
		t.Helper()
		for _, q := range []string{"river bank", "money", "loan interest rate", "北京", "stream deposit account"} {
			want := search(t, ix, "single", q, 400)
			for name, got := range map[string][]keyword.Hit{"batch": search(t, ix, "batch", q, 400), "batch in sql": search(t, sqlOnly, "batch", q, 400)} {
				if !sameHits(got, want) {
					t.Fatalf("%s, query %q: %s = %v, one by one = %v", what, q, name, got, want)
				}
			}
		}
	}
	same("added")

	// Remove every third document (blocks are rewritten), then the rest.
	var some, rest []string
	for i, d := range docs {
		if i%3 == 0 {
			some = append(some, d.ID)
		} else {
			rest = append(rest, d.ID)
		}
	}
	for _, id := range []string{"batch", "single"} {
		apply(t, pool, ix, id, some)
		checkConsistent(t, pool, id)
	}
	same("some removed")
	var badFirst int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM keyword_blocks WHERE first_doc <> docs[1]
		OR EXISTS (SELECT 1 FROM unnest(docs) WITH ORDINALITY AS x(d, o) WHERE o > 1 AND d <= docs[o - 1])`).Scan(&badFirst); err != nil {
		t.Fatal(err)
	}
	if badFirst != 0 {
		t.Fatalf("%d blocks whose document numbers are not ascending from first_doc", badFirst)
	}
	apply(t, pool, ix, "batch", rest)
	if s := checkConsistent(t, pool, "batch"); s.NDocs != 0 || s.NPostings != 0 {
		t.Fatalf("after removing everything: %+v", s)
	}
	if b := blocks("batch"); b != 0 {
		t.Fatalf("%d blocks left after removing every document", b)
	}
}

// Prepared.Apply must leave an index exactly as Apply does (documents,
// their numbers and term vectors, blocks, statistics): all documents
// prepared, some prepared with another text or not at all, an id added
// twice, and one Prepared applied to indexes whose document numbers start
// elsewhere (its blocks are renumbered).
func TestPreparedApplyMatchesApply(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	words := strings.Fields("river bank money flow water loan interest rate stream current account deposit 北京 上海 cells cell's")
	doc := func(prefix string, i int) keyword.Doc {
		var w []string
		for j := range 1 + i%9 {
			w = append(w, words[(i*(j+5)+j*j)%len(words)])
		}
		return keyword.Doc{ID: fmt.Sprintf("%s%03d", prefix, i), Text: strings.Join(w, " ")}
	}
	var a, b []keyword.Doc
	for i := range 200 {
		a, b = append(a, doc("a", i)), append(b, doc("b", i))
	}
	pa, pb := ix.Prepare(a), ix.Prepare(b)
	applyWith := func(w interface {
		Apply(context.Context, pgx.Tx, string, []string, []keyword.Doc) error
	}, indexID string, remove []string, add []keyword.Doc) {
		t.Helper()
		if err := postgres.Tx(context.Background(), pool, func(tx pgx.Tx) error {
			return w.Apply(context.Background(), tx, indexID, remove, add)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// b changed: one text differs from the prepared one, one document was not
	// prepared, one id comes twice (the last wins).
	bChanged := slices.Clone(b)
	bChanged[7].Text = "a different text about loans"
	bChanged = append(bChanged, doc("c", 1), keyword.Doc{ID: b[3].ID, Text: "replaced again"})
	var removeSome []string
	for i := 0; i < len(a); i += 4 {
		removeSome = append(removeSome, a[i].ID)
	}
	steps := []struct {
		remove []string
		add    []keyword.Doc
		pre    *keyword.Prepared
	}{
		{nil, a, pa},               // every document prepared, in order
		{removeSome, bChanged, pb}, // partly prepared
		{nil, a[:50], pa},          // a subset: replaces those documents
		{nil, a, pa},               // the same Prepared again, numbered from elsewhere
	}
	for s, st := range steps {
		applyWith(ix, "plain", st.remove, st.add)
		applyWith(st.pre, "prep", st.remove, st.add)
		// Another index whose numbers start later.
		applyWith(ix, "plain-late", nil, []keyword.Doc{doc("z", s)})
		applyWith(st.pre, "prep-late", nil, []keyword.Doc{doc("z", s)})
		applyWith(ix, "plain-late", st.remove, st.add)
		applyWith(st.pre, "prep-late", st.remove, st.add)
		for _, pair := range [][2]string{{"plain", "prep"}, {"plain-late", "prep-late"}} {
			if got, want := dumpIndex(t, pool, pair[1]), dumpIndex(t, pool, pair[0]); got != want {
				t.Fatalf("step %d: %s differs from %s:\n%s\nwant\n%s", s, pair[1], pair[0], got, want)
			}
			checkConsistent(t, pool, pair[1])
		}
	}
}

// dumpIndex is everything stored for an index, as text.
func dumpIndex(t *testing.T, pool *pgxpool.Pool, indexID string) string {
	t.Helper()
	var out string
	err := pool.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT format('%s %s %s %s %s', n_docs, total_len, n_postings, version, next_doc_no) FROM keyword_indexes WHERE index_id = $1),
		(SELECT string_agg(format('%s %s %s %s', d.doc_id, d.doc_no, d.length, encode(d.terms, 'hex')), E'\n' ORDER BY d.doc_no)
		 FROM keyword_docs d JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1),
		(SELECT string_agg(format('%s %s %s %s', b.term, b.first_doc, b.docs, b.tfs), E'\n' ORDER BY b.term, b.first_doc)
		 FROM keyword_blocks b JOIN keyword_indexes i USING (index_no) WHERE i.index_id = $1))`, indexID).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
