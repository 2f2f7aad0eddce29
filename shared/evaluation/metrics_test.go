package evaluation_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// §5's formulas, case by case: precision divides by k (not by the number
// retrieved), sets not lists, recall over the gold set.
func TestRetrievalScores(t *testing.T) {
	const fa, fb = "file_aaaaaaaaaaaaaaaaaaaaaaaa", "file_bbbbbbbbbbbbbbbbbbbbbbbb"
	a1, a2, b1 := fa+"_0000000000000001", fa+"_0000000000000002", fb+"_0000000000000001"
	cases := []struct {
		name            string
		retrieved, gold []string
		want            map[string]float64
	}{
		{"gold at rank 2 of 3", []string{b1, a1, a2}, []string{a1},
			map[string]float64{"recall@1": 0, "recall@3": 1, "f1@1": 0, "f1@3": 2 * (1.0 / 3) * 1 / (1.0/3 + 1), "f1@10": 2 * 0.1 / 1.1}},
		{"two gold, one found at rank 1", []string{a1}, []string{a1, b1},
			map[string]float64{"recall@1": 0.5, "recall@10": 0.5, "f1@1": 2 * 1 * 0.5 / 1.5, "f1@5": 2 * 0.2 * 0.5 / 0.7}},
		{"nothing retrieved scores 0", nil, []string{a1},
			map[string]float64{"recall@1": 0, "recall@10": 0, "f1@10": 0, "ndcg@10": 0}},
		{"duplicate ids count once", []string{a1, a1}, []string{a1},
			map[string]float64{"recall@3": 1, "f1@3": 2 * (1.0 / 3) / (1.0/3 + 1)}},
	}
	for _, c := range cases {
		docs := make([]string, len(c.retrieved))
		for i, id := range c.retrieved {
			docs[i] = evaluation.DocumentOf(id)
		}
		got := evaluation.RetrievalScores(c.retrieved, docs, c.gold)
		for k, v := range c.want {
			if !near(got[k], v) {
				t.Errorf("%s: %s = %v, want %v", c.name, k, got[k], v)
			}
		}
		if len(got) != 9 {
			t.Errorf("%s: %d metrics, want recall@k and f1@k for 1, 3, 5, 10 and ndcg@10", c.name, len(got))
		}
	}
}

// Document-level nDCG@10 as figure 5 computes it: chunks map to their
// document, the first occurrence counts, BEIR's formula.
func TestDocNDCG(t *testing.T) {
	const fa, fb = "file_aaaaaaaaaaaaaaaaaaaaaaaa", "file_bbbbbbbbbbbbbbbbbbbbbbbb"
	// Ranked documents: b, a, a (a chunk of a again), gold is a's chunk:
	// a counts at rank 2 only.
	got := evaluation.DocNDCG([]string{fb, fa, fa}, []string{fa + "_0000000000000009"})
	if want := 1 / math.Log2(3); !near(got, want) {
		t.Fatalf("nDCG@10 = %v, want %v", got, want)
	}
	// A gold id may name a whole document.
	if got := evaluation.DocNDCG([]string{fa}, []string{fa}); !near(got, 1) {
		t.Fatalf("document gold id: %v", got)
	}
}

func TestAggregate(t *testing.T) {
	m, overall := evaluation.Aggregate([]map[string]float64{{"recall@10": 1, "f1@1": 0.5}, {"recall@10": 0, "f1@1": 0}}, nil)
	if m["recall@10"] != 0.5 || m["f1@1"] != 0.25 || overall == nil || *overall != 0.5 {
		t.Fatalf("retrieval only: %v %v", m, overall)
	}
	m, overall = evaluation.Aggregate([]map[string]float64{{"recall@10": 1}}, []float64{1, 0, 0, 1})
	if m["answer_correctness"] != 0.5 || *overall != 0.5 {
		t.Fatalf("with answers the overall score is answer_correctness: %v %v", m, *overall)
	}
	if m, overall := evaluation.Aggregate(nil, nil); len(m) != 0 || overall != nil {
		t.Fatalf("nothing to score: %v %v", m, overall)
	}
}

func TestParseJSONL(t *testing.T) {
	items, chunks, answers, err := evaluation.ParseJSONL([]byte("{\"query\":\"a\"}\n\n{\"query\":\"b\",\"gold_chunk_ids\":[\"x\"]}\n"))
	if err != nil || len(items) != 2 || !chunks || answers || items[1].ItemIndex != 1 || items[1].GoldChunkIDs[0] != "x" {
		t.Fatalf("%+v %v %v %v", items, chunks, answers, err)
	}
	for _, c := range []struct{ in, code, msg string }{
		{"{\"query\":\"a\"}\n{\"gold_answer\":\"x\"}\n", "missing_query", "第2行缺少必需的'query'字段"},
		{"{\"query\":\"a\"}\n\n{not json\n", "invalid_jsonl", "第3行JSON格式错误"},
		{"{\"query\":\"a\",\"gold_chunk_ids\":\"x\"}", "invalid_jsonl", "第1行"},
		{"\n\n", "empty_dataset", "文件中没有有效的问题数据"},
	} {
		_, _, _, err := evaluation.ParseJSONL([]byte(c.in))
		var fe *failure.Error
		if !errors.As(err, &fe) || fe.Code != c.code || fe.Kind != failure.KindInvalid || !strings.Contains(fe.Message, c.msg) {
			t.Errorf("%q: %v, want %s %q", c.in, err, c.code, c.msg)
		}
	}
}

func TestParseJudgement(t *testing.T) {
	for in, want := range map[string]float64{
		`{"score": 1.0, "reasoning": "ok"}`:                        1,
		"```json\n{\"score\": 0.0, \"reasoning\": \"no\"}\n```":    0,
		"```\n{\"score\": \"1\", \"reasoning\": \"quoted\"}\n```":  1,
		"Here is my verdict: {\"score\": 1, \"reasoning\": \"x\"}": 1,
		`{"score": 7}`: 1,
	} {
		j, err := evaluation.ParseJudgement(in)
		if err != nil || j.Score != want {
			t.Errorf("%q: %+v %v, want score %v", in, j, err, want)
		}
	}
	for _, in := range []string{"yes", `{"reasoning": "no score"}`, `{"score": "high"}`} {
		if _, err := evaluation.ParseJudgement(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}
