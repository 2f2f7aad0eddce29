package retrievaleval_test

import (
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNDCGAndRecall(t *testing.T) {
	l2 := math.Log2
	cases := []struct {
		name       string
		ranked     []string
		rels       map[string]int
		k          int
		ndcg, rcll float64
	}{
		{"perfect", []string{"a", "b", "x"}, map[string]int{"a": 1, "b": 1}, 10, 1, 1},
		// DCG = 1/log2(3) + 1/log2(5); ideal = 1 + 1/log2(3).
		{"relevant at ranks 2 and 4", []string{"x", "a", "y", "b"}, map[string]int{"a": 1, "b": 1}, 10,
			(1/l2(3) + 1/l2(5)) / (1 + 1/l2(3)), 1},
		// Graded: DCG = 1 + 2/log2(3); ideal = 2 + 1/log2(3).
		{"graded gains", []string{"c", "d"}, map[string]int{"d": 2, "c": 1}, 10,
			(1 + 2/l2(3)) / (2 + 1/l2(3)), 1},
		{"cut at k", []string{"x", "a", "b"}, map[string]int{"a": 1, "b": 1}, 1, 0, 0},
		{"half found", []string{"a", "x"}, map[string]int{"a": 1, "b": 1, "n": 0}, 10, 1 / (1 + 1/l2(3)), 0.5},
		{"duplicates count once", []string{"a", "a", "b"}, map[string]int{"a": 1, "b": 1}, 2, 1, 1},
		{"empty ranking", nil, map[string]int{"a": 1}, 10, 0, 0},
		{"nothing relevant", []string{"a"}, map[string]int{"a": 0}, 10, 0, 0},
	}
	for _, tc := range cases {
		if got := retrievaleval.NDCG(tc.ranked, tc.rels, tc.k); !near(got, tc.ndcg) {
			t.Errorf("%s: nDCG@%d = %v, want %v", tc.name, tc.k, got, tc.ndcg)
		}
		if got := retrievaleval.Recall(tc.ranked, tc.rels, tc.k); !near(got, tc.rcll) {
			t.Errorf("%s: Recall@%d = %v, want %v", tc.name, tc.k, got, tc.rcll)
		}
	}
}

// A tiny BEIR-layout set: a gzipped corpus, queries.jsonl with a query that
// is not judged (a training query) and qrels with a query judged only 0.
func TestLoadAndEvaluateTinyDataset(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "corpus.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	for _, id := range []string{"d1", "d2", "d3", "d4", "d5"} {
		_, _ = gz.Write([]byte(`{"_id": "` + id + `", "title": "T ` + id + `", "text": "text of ` + id + `", "metadata": {}}` + "\n"))
	}
	_ = gz.Close()
	_ = f.Close()
	write("queries.jsonl", strings.Join([]string{
		`{"_id": "q1", "text": "first"}`,
		`{"_id": "q2", "text": "second"}`,
		`{"_id": "q3", "text": "third"}`,
		`{"_id": "q4", "text": "zero only"}`,
		`{"_id": "train", "text": "not judged"}`,
	}, "\n")+"\n")
	write("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1\nq2\td4\t2\nq2\td5\t1\nq3\td9\t1\nq4\td1\t0\n")

	ds, err := retrievaleval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Corpus) != 5 || ds.Corpus[2].Title != "T d3" || len(ds.Queries) != 4 || ds.Queries[1].Text != "second" {
		t.Fatalf("loaded corpus=%d queries=%v", len(ds.Corpus), ds.Queries)
	}
	rankings := map[string][]string{
		"first":  {"d3", "d1", "d4", "d2"},
		"second": {"d5", "d4"},
		"third":  {},
	}
	rep, err := retrievaleval.Evaluate(ds, func(q string) ([]string, error) {
		if q == "not judged" || q == "zero only" {
			t.Errorf("evaluated query %q", q)
		}
		return rankings[q], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l2 := math.Log2
	q1 := (1/l2(3) + 1/l2(5)) / (1 + 1/l2(3))
	q2 := (1 + 2/l2(3)) / (2 + 1/l2(3))
	if rep.Queries != 3 || !near(rep.NDCG10, (q1+q2+0)/3) || !near(rep.Recall10, 2.0/3) || !near(rep.Recall100, 2.0/3) {
		t.Fatalf("report %+v, want 3 queries, nDCG@10 %v, recall 2/3", rep, (q1+q2)/3)
	}
}

func TestLoadReportsMissingFiles(t *testing.T) {
	if _, err := retrievaleval.Load(t.TempDir()); err == nil {
		t.Fatal("empty directory loaded")
	}
}
