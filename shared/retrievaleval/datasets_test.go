package retrievaleval_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
)

// The benchmark sets live outside the module (see the datasets README):
// YUXI_DATASETS_DIR, or a shared/datasets or datasets directory next to an
// ancestor of the working directory. Absent data skips these tests.
func dataset(t *testing.T, name string) *retrievaleval.Dataset {
	t.Helper()
	if testing.Short() {
		t.Skip("dataset benchmark skipped with -short")
	}
	var dir string
	if d := os.Getenv("YUXI_DATASETS_DIR"); d != "" {
		dir = filepath.Join(d, name)
	} else if wd, err := os.Getwd(); err == nil {
		for d := wd; dir == "" && d != filepath.Dir(d); d = filepath.Dir(d) {
			for _, c := range []string{filepath.Join(d, "shared", "datasets", name), filepath.Join(d, "datasets", name)} {
				if st, err := os.Stat(filepath.Join(c, "qrels", "test.tsv")); err == nil && !st.IsDir() {
					dir = c
					break
				}
			}
		}
	}
	if dir == "" {
		t.Skipf("dataset %s not found (set YUXI_DATASETS_DIR)", name)
	}
	ds, err := retrievaleval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// indexCorpus indexes title + " " + text of every document, in batches of
// one transaction each.
func indexCorpus(t *testing.T, pool *pgxpool.Pool, ix *keyword.Index, indexID string, corpus []retrievaleval.Doc) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	const batch = 1000
	for i := 0; i < len(corpus); i += batch {
		docs := make([]keyword.Doc, 0, batch)
		for _, d := range corpus[i:min(i+batch, len(corpus))] {
			docs = append(docs, keyword.Doc{ID: d.ID, Text: d.Title + " " + d.Text})
		}
		if err := postgres.Tx(ctx, pool, func(tx pgx.Tx) error {
			return ix.Apply(ctx, tx, indexID, nil, docs)
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("indexed %d documents in %v", len(corpus), time.Since(start).Round(time.Millisecond))
}

func keywordRanker(ix *keyword.Index, indexID string, k int) retrievaleval.Ranker {
	return func(q string) ([]string, error) {
		hits, err := ix.Search(context.Background(), indexID, q, k, nil)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(hits))
		for i, h := range hits {
			ids[i] = h.ID
		}
		return ids, nil
	}
}

// evaluateKeyword indexes a dataset and evaluates BM25 over it twice: the
// first pass loads the cache, the second measures warm latency.
func evaluateKeyword(t *testing.T, name string, p keyword.Params) retrievaleval.Report {
	ds := dataset(t, name)
	pool, _ := pgtest.NewDatabase(t)
	ix := keyword.New(pool, keyword.NewAnalyzer("auto"), p)
	indexCorpus(t, pool, ix, name, ds.Corpus)
	start := time.Now()
	if _, err := ix.Search(context.Background(), name, "warm up", 1, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("cache loaded in %v", time.Since(start).Round(time.Millisecond))
	rep, err := retrievaleval.Evaluate(ds, keywordRanker(ix, name, 100))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s BM25 (k1=%.2f b=%.2f): %v", name, p.K1, p.B, rep)
	return rep
}

func TestSciFactBM25(t *testing.T) {
	t.Parallel()
	rep := evaluateKeyword(t, "scifact", keyword.Params{K1: 0.9, B: 0.4})
	if rep.NDCG10 < 0.665 {
		t.Errorf("SciFact nDCG@10 = %.4f, below BEIR's BM25 (0.665)", rep.NDCG10)
	}
}

func TestCMRC2018BM25(t *testing.T) {
	t.Parallel()
	rep := evaluateKeyword(t, "cmrc2018-dev", keyword.Params{K1: 0.9, B: 0.4})
	if rep.NDCG10 < 0.97 {
		t.Errorf("cmrc2018-dev nDCG@10 = %.4f, want ≥ 0.97", rep.NDCG10)
	}
}

// The hashing embedder alone with exact cosine search: a lexical baseline
// for the vector path, expected well below BM25 (no idf, collisions).
func TestSciFactHashingEmbedder(t *testing.T) {
	t.Parallel()
	ds := dataset(t, "scifact")
	h := embed.NewHashing(embed.DefaultHashingDim)
	texts := make([]string, len(ds.Corpus))
	for i, d := range ds.Corpus {
		texts[i] = d.Title + " " + d.Text
	}
	start := time.Now()
	docs, err := h.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded %d documents in %v", len(docs), time.Since(start).Round(time.Millisecond))
	type scored struct {
		i int
		s float64
	}
	rep, err := retrievaleval.Evaluate(ds, func(q string) ([]string, error) {
		qv, err := h.Embed(context.Background(), []string{q})
		if err != nil {
			return nil, err
		}
		all := make([]scored, len(docs))
		for i, d := range docs {
			all[i] = scored{i, embed.Dot(qv[0], d)}
		}
		slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
		ids := make([]string, 0, 100)
		for _, x := range all[:min(100, len(all))] {
			ids = append(ids, ds.Corpus[x.i].ID)
		}
		return ids, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scifact %s exact cosine: %v", h.Model(), rep)
	if rep.NDCG10 < 0.3 {
		t.Errorf("hashing embedder nDCG@10 = %.4f, far below its usual level", rep.NDCG10)
	}
}

// Warm query latency of the keyword index at 100k documents: SciFact
// replicated (every posting list 19× longer than SciFact's, the costly case
// for BM25). Opt-in, it takes minutes: YUXI_SCALE_TEST=1.
func TestKeywordLatencyAt100kDocs(t *testing.T) {
	if os.Getenv("YUXI_SCALE_TEST") == "" {
		t.Skip("set YUXI_SCALE_TEST=1 to index 100k documents")
	}
	ds := dataset(t, "scifact")
	pool, _ := pgtest.NewDatabase(t)
	ix := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{})
	var corpus []retrievaleval.Doc
	for r := 0; len(corpus) < 100_000; r++ {
		for _, d := range ds.Corpus {
			if len(corpus) == 100_000 {
				break
			}
			corpus = append(corpus, retrievaleval.Doc{ID: fmt.Sprintf("%s#%d", d.ID, r), Title: d.Title, Text: d.Text})
		}
	}
	indexCorpus(t, pool, ix, "big", corpus)
	start := time.Now()
	if _, err := ix.Search(context.Background(), "big", "warm up", 1, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("cache loaded in %v", time.Since(start).Round(time.Millisecond))
	for _, k := range []int{10, 100} {
		rep, err := retrievaleval.Evaluate(ds, keywordRanker(ix, "big", k))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("100k docs, k=%d: latency p50=%v p99=%v max=%v", k, rep.P50, rep.P99, rep.Max)
	}
	// One more process catching up with a small change.
	if err := postgres.Tx(context.Background(), pool, func(tx pgx.Tx) error {
		return ix.Apply(context.Background(), tx, "big", []string{corpus[0].ID}, []keyword.Doc{{ID: "new", Text: "a new chunk about stem cells"}})
	}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := ix.Search(context.Background(), "big", "stem cells", 10, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("search after a change (catch-up) took %v", time.Since(start).Round(time.Microsecond))
}
