// Package retrievaleval measures retrieval quality offline: it loads
// retrieval test sets in BEIR's layout (corpus.jsonl[.gz], queries.jsonl,
// qrels/test.tsv) and scores a ranking function with nDCG@10 and Recall@k,
// the way BEIR reports them (only the queries judged in qrels/test.tsv count;
// linear gains; recall over all relevant documents).
//
// Imported by: tests and benchmarks of the retrieval packages (keyword,
// embed, vector, hybrid search). May import: the standard library only (its
// own tests use keyword, embed and pgtest to measure them on the datasets).
package retrievaleval

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Doc is a corpus document.
type Doc struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Query is a test query.
type Query struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
}

// Dataset is a loaded BEIR-layout test set.
type Dataset struct {
	Corpus []Doc
	// Queries are the judged test queries, in qrels order of first
	// appearance (queries.jsonl may hold more, e.g. training queries).
	Queries []Query
	// Qrels maps a query id to its judged documents and their relevance.
	Qrels map[string]map[string]int
}

// Load reads the dataset in dir: corpus.jsonl or corpus.jsonl.gz,
// queries.jsonl and qrels/test.tsv (a header line, then
// query-id<TAB>corpus-id<TAB>score).
func Load(dir string) (*Dataset, error) {
	ds := &Dataset{}
	if err := readQrels(filepath.Join(dir, "qrels", "test.tsv"), ds); err != nil {
		return nil, err
	}
	corpus := filepath.Join(dir, "corpus.jsonl")
	if _, err := os.Stat(corpus); errors.Is(err, fs.ErrNotExist) {
		corpus += ".gz"
	}
	err := readJSONL(corpus, func(line []byte) error {
		var d Doc
		if err := json.Unmarshal(line, &d); err != nil {
			return err
		}
		ds.Corpus = append(ds.Corpus, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	texts := map[string]string{}
	err = readJSONL(filepath.Join(dir, "queries.jsonl"), func(line []byte) error {
		var q Query
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		if _, judged := ds.Qrels[q.ID]; judged {
			texts[q.ID] = q.Text
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range ds.Queries {
		text, ok := texts[ds.Queries[i].ID]
		if !ok {
			return nil, fmt.Errorf("load %s: judged query %s is not in queries.jsonl", dir, ds.Queries[i].ID)
		}
		ds.Queries[i].Text = text
	}
	return ds, nil
}

func readQrels(path string, ds *Dataset) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read qrels: %w", err)
	}
	defer f.Close()
	ds.Qrels = map[string]map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || n == 1 && strings.HasPrefix(line, "query-id") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return fmt.Errorf("read qrels %s:%d: want 3 tab-separated fields, got %d", path, n, len(f))
		}
		score, err := strconv.Atoi(f[2])
		if err != nil {
			return fmt.Errorf("read qrels %s:%d: score: %w", path, n, err)
		}
		rels := ds.Qrels[f[0]]
		if rels == nil {
			rels = map[string]int{}
			ds.Qrels[f[0]] = rels
			ds.Queries = append(ds.Queries, Query{ID: f[0]})
		}
		rels[f[1]] = score
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read qrels %s: %w", path, err)
	}
	return nil
}

func readJSONL(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("read %s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// Ranker returns document ids for a query, best first.
type Ranker func(query string) ([]string, error)

// Report is the outcome of an evaluation: metrics averaged over the judged
// queries, and the ranker's latency per query.
type Report struct {
	Queries                     int
	NDCG10, Recall10, Recall100 float64
	P50, P99, Max               time.Duration
}

func (r Report) String() string {
	return fmt.Sprintf("queries=%d nDCG@10=%.4f R@10=%.4f R@100=%.4f latency p50=%v p99=%v max=%v",
		r.Queries, r.NDCG10, r.Recall10, r.Recall100, r.P50, r.P99, r.Max)
}

// Evaluate runs rank on every judged query that has at least one relevant
// document (relevance > 0), one at a time, and averages the metrics.
func Evaluate(ds *Dataset, rank Ranker) (Report, error) {
	var rep Report
	var lat []time.Duration
	for _, q := range ds.Queries {
		rels := ds.Qrels[q.ID]
		if !hasRelevant(rels) {
			continue
		}
		start := time.Now()
		ranked, err := rank(q.Text)
		lat = append(lat, time.Since(start))
		if err != nil {
			return Report{}, fmt.Errorf("query %s: %w", q.ID, err)
		}
		ranked = dedupe(ranked)
		rep.Queries++
		rep.NDCG10 += NDCG(ranked, rels, 10)
		rep.Recall10 += Recall(ranked, rels, 10)
		rep.Recall100 += Recall(ranked, rels, 100)
	}
	if rep.Queries == 0 {
		return Report{}, errors.New("no judged queries with relevant documents")
	}
	n := float64(rep.Queries)
	rep.NDCG10 /= n
	rep.Recall10 /= n
	rep.Recall100 /= n
	slices.Sort(lat)
	rep.P50 = lat[len(lat)/2]
	rep.P99 = lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)]
	rep.Max = lat[len(lat)-1]
	return rep, nil
}

func hasRelevant(rels map[string]int) bool {
	for _, r := range rels {
		if r > 0 {
			return true
		}
	}
	return false
}

// dedupe keeps the first occurrence of each id: a document counts once.
// It does not modify ids.
func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// NDCG is the normalised discounted cumulative gain at k of a ranking, with
// linear gains (the relevance value) and log2(rank+1) discounts, as
// trec_eval's ndcg_cut and BEIR compute it. It is 0 when nothing is relevant.
func NDCG(ranked []string, rels map[string]int, k int) float64 {
	ranked = dedupe(ranked)
	dcg := 0.0
	for i, id := range ranked[:min(k, len(ranked))] {
		if r := rels[id]; r > 0 {
			dcg += float64(r) / math.Log2(float64(i+2))
		}
	}
	var ideal []int
	for _, r := range rels {
		if r > 0 {
			ideal = append(ideal, r)
		}
	}
	slices.Sort(ideal)
	slices.Reverse(ideal)
	idcg := 0.0
	for i, r := range ideal[:min(k, len(ideal))] {
		idcg += float64(r) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// Recall is the share of the relevant documents (relevance > 0) found in the
// first k of the ranking. It is 0 when nothing is relevant.
func Recall(ranked []string, rels map[string]int, k int) float64 {
	ranked = dedupe(ranked)
	relevant, found := 0, 0
	for _, r := range rels {
		if r > 0 {
			relevant++
		}
	}
	for _, id := range ranked[:min(k, len(ranked))] {
		if rels[id] > 0 {
			found++
		}
	}
	if relevant == 0 {
		return 0
	}
	return float64(found) / float64(relevant)
}
