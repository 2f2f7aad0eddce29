package evaluation

import (
	"fmt"
	"math"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/retrievaleval"
)

// KValues are the cut-offs of the retrieval metrics, as the original.
var KValues = []int{1, 3, 5, 10}

// NDCGMetric is the document-level nDCG@10 key (see DocNDCG).
const NDCGMetric = "ndcg@10"

// precisionAt is |set(retrieved[:k]) ∩ gold| / k — divided by k, not by the
// number retrieved, as the original; 0 when retrieved[:k] is empty.
func precisionAt(retrieved []string, gold map[string]bool, k int) float64 {
	top := head(retrieved, k)
	if len(top) == 0 {
		return 0
	}
	return float64(hits(top, gold)) / float64(k)
}

// recallAt is |set(retrieved[:k]) ∩ gold| / |gold|; 0 when gold is empty.
func recallAt(retrieved []string, gold map[string]bool, k int) float64 {
	if len(gold) == 0 {
		return 0
	}
	return float64(hits(head(retrieved, k), gold)) / float64(len(gold))
}

// f1At is 2PR/(P+R), 0 when P+R = 0.
func f1At(retrieved []string, gold map[string]bool, k int) float64 {
	p, r := precisionAt(retrieved, gold, k), recallAt(retrieved, gold, k)
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

func head(ids []string, k int) []string {
	if len(ids) > k {
		return ids[:k]
	}
	return ids
}

// hits counts the distinct ids of top in gold (set semantics, as the original).
func hits(top []string, gold map[string]bool) int {
	seen := map[string]bool{}
	n := 0
	for _, id := range top {
		if gold[id] && !seen[id] {
			seen[id] = true
			n++
		}
	}
	return n
}

// DocumentOf is the document (file) a chunk id or a gold id names: chunk ids
// are "<file_id>_<content hash>[_n]"; any other id names itself (a gold id
// may name a whole document by its file id).
func DocumentOf(id string) string {
	const fileIDLen = len("file_") + 24
	if len(id) > fileIDLen && strings.HasPrefix(id, "file_") && id[fileIDLen] == '_' {
		return id[:fileIDLen]
	}
	return id
}

// DocNDCG is the document-level nDCG@10 of make bench's figure 5: the
// ranking of chunks is mapped to their documents, a document counting at its
// first occurrence, and scored with BEIR's formula (linear gains, log2
// discounts; shared/retrievaleval.NDCG) against the documents of the gold ids
// (relevance 1).
func DocNDCG(retrievedDocs []string, goldIDs []string) float64 {
	rels := map[string]int{}
	for _, g := range goldIDs {
		rels[DocumentOf(g)] = 1
	}
	return retrievaleval.NDCG(retrievedDocs, rels, 10)
}

// RetrievalScores are one item's retrieval metrics: recall@k and f1@k for
// every k of KValues, and the document-level nDCG@10. retrieved are the
// chunk ids in rank order, retrievedDocs their documents (file ids).
//
// A deliberate difference from the original: an item whose retrieval
// returned nothing gets every metric 0, where the original recorded {} (and
// so dropped every key from the means when it was the first item, and left
// it out of overall_score's recall@10 mean).
func RetrievalScores(retrieved, retrievedDocs, gold []string) map[string]float64 {
	set := map[string]bool{}
	for _, g := range gold {
		set[g] = true
	}
	out := map[string]float64{}
	for _, k := range KValues {
		out[fmt.Sprintf("recall@%d", k)] = recallAt(retrieved, set, k)
		out[fmt.Sprintf("f1@%d", k)] = f1At(retrieved, set, k)
	}
	out[NDCGMetric] = DocNDCG(retrievedDocs, gold)
	return out
}

// Aggregate is the run's metrics: each retrieval metric is the arithmetic
// mean over the items that had gold chunks; answer_correctness the mean
// judge score over the judged items; overall_score the mean answer score if
// any item was judged, else the mean recall@10, else nil — the original's
// aggregate_metrics.
func Aggregate(retrieval []map[string]float64, answers []float64) (map[string]float64, *float64) {
	metrics := map[string]float64{}
	if len(retrieval) > 0 {
		sums := map[string]float64{}
		for _, m := range retrieval {
			for k, v := range m {
				sums[k] += v
			}
		}
		for k, v := range sums {
			metrics[k] = round6(v / float64(len(retrieval)))
		}
	}
	var overall *float64
	if len(answers) > 0 {
		var s float64
		for _, a := range answers {
			s += a
		}
		v := round6(s / float64(len(answers)))
		metrics["answer_correctness"] = v
		overall = &v
	} else if r, ok := metrics["recall@10"]; ok {
		v := r
		overall = &v
	}
	return metrics, overall
}

// round6 keeps metrics short and stable in JSON (and in comparisons of a
// resumed run with an uninterrupted one).
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
