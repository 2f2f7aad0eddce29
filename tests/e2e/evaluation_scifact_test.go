package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// datasetDir finds a BEIR-format set as shared/retrievaleval's tests do:
// YUXI_DATASETS_DIR, or shared/datasets next to an ancestor directory.
func datasetDir(t *testing.T, name string) string {
	if d := os.Getenv("YUXI_DATASETS_DIR"); d != "" {
		return filepath.Join(d, name)
	}
	wd, _ := os.Getwd()
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		for _, c := range []string{filepath.Join(d, "shared", "datasets", name), filepath.Join(d, "datasets", name)} {
			if _, err := os.Stat(filepath.Join(c, "qrels", "test.tsv")); err == nil {
				return c
			}
		}
	}
	t.Skip(name + " not found (set YUXI_DATASETS_DIR)")
	return ""
}

// A slice of SciFact through the product's evaluation path — corpus into a
// KB through the API, qrels as a dataset whose gold ids are the relevant
// documents' file ids, an evaluation run — scores the same document-level
// nDCG@10 as make bench's figure 5 computes from the same retrieval
// (shared/retrievaleval over chunks mapped to their documents).
func TestEvaluationNDCGAgreesWithBenchOnSciFact(t *testing.T) {
	t.Parallel()
	ndcgThroughProduct(t, "scifact", 25, 75)
}

// The same check on a slice of cmrc2018 (Chinese reading comprehension,
// BEIR-format: paragraphs as documents, questions with their paragraph as
// the relevant document): the product's run and the bench's computation
// agree on nDCG@10.
func TestEvaluationNDCGAgreesWithBenchOnCMRC2018(t *testing.T) {
	t.Parallel()
	ndcgThroughProduct(t, "cmrc2018-dev", 30, 70)
}

// ndcgThroughProduct puts the first queries of set name (with their
// relevant documents and distractors more documents) through the product's
// evaluation path and compares its nDCG@10 with the bench's computation.
func ndcgThroughProduct(t *testing.T, name string, queries, distractors int) {
	ds, err := retrievaleval.Load(datasetDir(t, name))
	if err != nil {
		t.Fatal(err)
	}
	sub := &retrievaleval.Dataset{Queries: ds.Queries[:queries], Qrels: map[string]map[string]int{}}
	keep := map[string]bool{}
	for _, q := range sub.Queries {
		sub.Qrels[q.ID] = ds.Qrels[q.ID]
		for id := range ds.Qrels[q.ID] {
			keep[id] = true
		}
	}
	for i, d := range ds.Corpus {
		if keep[d.ID] || i < distractors {
			sub.Corpus = append(sub.Corpus, d)
			keep[d.ID] = true
		}
	}

	p := testkit.StartLocal(t, nil)
	c := p.Admin
	kbID := c.NewKnowledgeBase(name+" slice", name+" through the evaluation path", nil)
	files := map[string][]byte{}
	for _, d := range sub.Corpus {
		md := d.Text
		if d.Title != "" {
			md = "# " + d.Title + "\n\n" + md
		}
		files[d.ID+".md"] = []byte(md + "\n")
	}
	ingested := c.Ingest(kbID, files, 3*time.Minute)
	docOf, fileOf := map[string]string{}, map[string]string{}
	for id, f := range ingested {
		if f["status"] != "indexed" {
			t.Fatalf("%v: %v", f["original_filename"], f["status"])
		}
		doc := f["original_filename"].(string)
		doc = doc[:len(doc)-len(".md")]
		docOf[id], fileOf[doc] = doc, id
	}

	// The bench's computation: figure 5's options, chunks → documents,
	// retrievaleval's nDCG@10.
	opt := kb.DefaultRetrieval()
	opt.SearchMode, opt.FinalTopK, opt.BM25TopK, opt.RecallTopK = "keyword", 100, 100, 100
	k, err := p.P.App.Knowledge.KBs.Load(context.Background(), kbID)
	if err != nil {
		t.Fatal(err)
	}
	bench, err := retrievaleval.Evaluate(sub, func(q string) ([]string, error) {
		res, err := p.P.App.Knowledge.Retriever.Query(context.Background(), k, q, opt, "")
		var docs []string
		for _, r := range res {
			docs = append(docs, docOf[r.FileID])
		}
		return docs, err
	})
	if err != nil {
		t.Fatal(err)
	}

	// The product's: qrels as a dataset, a run with the same options.
	var b bytes.Buffer
	for _, q := range sub.Queries {
		var gold []string
		for id, rel := range sub.Qrels[q.ID] {
			if rel > 0 {
				gold = append(gold, fileOf[id])
			}
		}
		line, _ := json.Marshal(map[string]any{"query": q.Text, "gold_chunk_ids": gold})
		b.Write(append(line, '\n'))
	}
	up := c.UploadDataset(kbID, name+".jsonl", name+" slice", b.Bytes())
	if up.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	runID := c.Data("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": up.JSON()["data"].(map[string]any)["dataset_id"],
		"model_config": map[string]any{"search_mode": "keyword", "final_top_k": 100, "bm25_top_k": 100, "recall_top_k": 100}}).(map[string]any)["run_id"].(string)
	run := c.WaitEvaluationRun(kbID, runID, 2*time.Minute, nil)
	product := run["metrics"].(map[string]any)["ndcg@10"].(float64)
	t.Logf("%s slice (%d queries, %d documents): nDCG@10 through the evaluation run %.4f, bench's computation %.4f",
		name, bench.Queries, len(sub.Corpus), product, bench.NDCG10)
	if bench.Queries != queries || math.Abs(product-bench.NDCG10) > 1e-5 || product < 0.3 {
		t.Fatalf("nDCG@10: run %.6f, bench %.6f over %d queries", product, bench.NDCG10, bench.Queries)
	}
}
