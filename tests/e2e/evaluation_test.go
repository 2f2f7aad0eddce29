package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// evalDocs are a small KB: one topic a file, each one chunk.
var evalDocs = map[string]string{
	"vacation.md":   "# Vacation\n\nEmployees get 25 days of paid vacation per year. Unused vacation days expire in March.\n",
	"expenses.md":   "# Expenses\n\nExpense reports are due within 30 days. Meals abroad are reimbursed up to 60 euros per day.\n",
	"security.md":   "# Security\n\nLaptops must use full disk encryption. Passwords rotate every 90 days and badges are personal.\n",
	"onboarding.md": "# Onboarding\n\nNew hires meet their mentor on the first day and finish the security course within two weeks.\n",
}

// evalQuestions: query, the file whose chunk is gold, the gold answer.
var evalQuestions = []struct{ query, file, answer string }{
	{"how many days of paid vacation", "vacation.md", "25 days"},
	{"when do unused vacation days expire", "vacation.md", "March"},
	{"deadline for expense reports", "expenses.md", "30 days"},
	{"meals abroad reimbursed euros", "expenses.md", "60 euros"},
	{"laptop disk encryption", "security.md", "full disk encryption"},
	{"how often do passwords rotate", "security.md", "90 days"},
	{"who do new hires meet first day", "onboarding.md", "mentor"},
	{"security course deadline for new hires", "onboarding.md", "two weeks"},
	{"personal badges", "security.md", "personal"},
	{"vacation per year", "vacation.md", "25 days"},
	{"expense meals per day", "expenses.md", "60 euros"},
	{"mentor onboarding", "onboarding.md", "mentor"},
}

// judgeModels answer with the first context passage and judge by whether
// the generated answer contains the gold answer (in a ```json fence, to
// exercise fence stripping).
func judgeModels(s *llmtest.Server) {
	s.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		msg := req.LastUserMessage()
		switch req.Model {
		case "answerer":
			ctx := msg[strings.Index(msg, "[1] ")+4:]
			return llmtest.Text(strings.SplitN(ctx, "\n", 2)[0])
		case "judge":
			gold := between(msg, "标准答案：", "\n")
			answer := between(msg, "生成答案：", "\n")
			score := 0.0
			if strings.Contains(answer, gold) {
				score = 1
			}
			return llmtest.Text(fmt.Sprintf("```json\n{\"score\": %.1f, \"reasoning\": \"compared\"}\n```", score))
		}
		return llmtest.Text("?")
	})
}

func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i+len(start):]
	if j := strings.Index(s, end); j >= 0 {
		s = s[:j]
	}
	return strings.TrimSpace(s)
}

// The eleven routes' RAG side end to end: upload (with the original's
// line-numbered error), list, page, download, run with the KB's retrieval
// options overridden by model_config and a judge model, progress while
// running, per-item results whose metrics are the formulas of §5, a
// redelivered batch that changes nothing, re-indexing that keeps chunk ids
// and scores, and deletion.
func TestEvaluationRunsEndToEnd(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	judgeModels(p.LLM)
	c := p.Admin
	kbID := c.NewKnowledgeBase("eval handbook", "evaluated", nil)
	files := map[string][]byte{}
	for n, d := range evalDocs {
		files[n] = []byte(d)
	}
	ingested := c.Ingest(kbID, files, 60*time.Second)
	chunkOf := map[string]string{}
	for id, f := range ingested {
		chunks := testkit.FileChunkIDs(t, p.P.App.Pool, id)
		if len(chunks) != 1 || f["status"] != "indexed" {
			t.Fatalf("%s: %v chunks %v", f["original_filename"], f["status"], chunks)
		}
		chunkOf[f["original_filename"].(string)] = chunks[0]
	}

	// Upload: the original's line-numbered error, then a good benchmark.
	bad := c.UploadDataset(kbID, "bad.jsonl", "bad", []byte("{\"query\":\"ok\"}\n{\"gold_answer\":\"x\"}\n"))
	if bad.Status != http.StatusBadRequest || bad.Code() != "missing_query" || !strings.Contains(string(bad.Body), "第2行缺少必需的'query'字段") {
		t.Fatalf("bad upload: %d %s", bad.Status, bad.Body)
	}
	if r := c.UploadDataset(kbID, "bench.csv", "csv", []byte("{\"query\":\"ok\"}\n")); r.Status != http.StatusBadRequest {
		t.Fatalf("csv upload: %d %s", r.Status, r.Body)
	}
	var jsonl bytes.Buffer
	for _, q := range evalQuestions {
		line, _ := json.Marshal(struct {
			Query        string   `json:"query"`
			GoldChunkIDs []string `json:"gold_chunk_ids"`
			GoldAnswer   string   `json:"gold_answer"`
		}{q.query, []string{chunkOf[q.file]}, q.answer})
		jsonl.Write(append(line, '\n'))
	}
	up := c.UploadDataset(kbID, "handbook.jsonl", "handbook bench", jsonl.Bytes())
	if up.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	ds := up.JSON()["data"].(map[string]any)
	dsID := ds["dataset_id"].(string)
	if ds["item_count"] != float64(len(evalQuestions)) || ds["has_gold_chunks"] != true || ds["has_gold_answers"] != true {
		t.Fatalf("dataset: %v", ds)
	}
	if list := c.Data("GET", "/api/evaluation/databases/"+kbID+"/datasets", nil).([]any); len(list) != 1 {
		t.Fatalf("datasets: %v", list)
	}
	page := c.Data("GET", "/api/evaluation/databases/"+kbID+"/datasets/"+dsID+"?page=3&page_size=5", nil).(map[string]any)
	if items := page["items"].([]any); len(items) != 2 || items[0].(map[string]any)["query"] != evalQuestions[10].query {
		t.Fatalf("page 3: %v", page)
	}
	if pg := page["pagination"].(map[string]any); pg["total_items"] != float64(12) || pg["total_pages"] != float64(3) || pg["has_next"] != false {
		t.Fatalf("pagination: %v", pg)
	}
	if r := c.Do("GET", "/api/evaluation/databases/"+kbID+"/datasets/"+dsID+"?page_size=101", nil); r.Status != http.StatusBadRequest {
		t.Fatalf("page_size 101: %d", r.Status)
	}
	dl := c.Do("GET", "/api/evaluation/datasets/"+dsID+"/download", nil)
	if dl.Status != http.StatusOK || dl.Header.Get("Content-Type") != "application/x-ndjson" ||
		!strings.Contains(dl.Header.Get("Content-Disposition"), "handbook%20bench.jsonl") {
		t.Fatalf("download: %d %v", dl.Status, dl.Header)
	}
	if !bytes.Equal(dl.Body, jsonl.Bytes()) {
		t.Fatalf("download differs from the upload:\n%s\nvs\n%s", dl.Body, jsonl.Bytes())
	}

	// A run: the KB's options (keyword search, as its builtin embedder
	// implies) with final_top_k overridden, answers judged.
	start := func() string {
		return c.Data("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": dsID,
			"model_config": map[string]any{"final_top_k": 2, "answer_llm": "fake:answerer", "judge_llm": "fake:judge"}}).(map[string]any)["run_id"].(string)
	}
	if r := c.Do("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": dsID,
		"model_config": map[string]any{"final_top_k": "many"}}); r.Status != http.StatusUnprocessableEntity || r.Code() != "invalid_query_params" {
		t.Fatalf("bad model_config: %d %s", r.Status, r.Body)
	}
	runID := start()
	var progress []float64
	run := c.WaitEvaluationRun(kbID, runID, 60*time.Second, func(r map[string]any) { progress = append(progress, r["completed_items"].(float64)) })
	if run["status"] != "completed" || run["completed_items"] != float64(12) || run["total_items"] != float64(12) {
		t.Fatalf("run: %v", run)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] < progress[i-1] {
			t.Fatalf("progress went back: %v", progress)
		}
	}
	conf := run["retrieval_config"].(map[string]any)
	if conf["final_top_k"] != float64(2) || conf["search_mode"] != "keyword" || conf["judge_llm"] != "fake:judge" {
		t.Fatalf("retrieval_config: %v", conf)
	}
	metrics := checkRunMetrics(t, run)
	if metrics["recall@10"] < 0.9 {
		t.Errorf("recall@10 = %v on questions written for their chunks", metrics["recall@10"])
	}

	// A redelivered batch (the first, long committed) changes nothing.
	ev, err := events.New(events.Source("test"), "redelivered-batch-0", events.EvaluationBatchReady{RunID: runID, Batch: 0}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range p.P.Routers {
		if rt.Handles(events.TypeEvaluationBatchReady) {
			if res := rt.Deliver(context.Background(), ev); res.Err != nil {
				t.Fatalf("redelivery: %v", res.Err)
			}
		}
	}
	again := c.WaitEvaluationRun(kbID, runID, time.Second, nil)
	if !jsonSame(again, run) {
		t.Fatalf("a redelivered batch changed the run:\n%v\n%v", run, again)
	}

	// Re-indexing unchanged content keeps the chunk ids: the same scores.
	var ids []string
	for id := range ingested {
		ids = append(ids, id)
	}
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/documents/index", map[string]any{"file_ids": ids})
	for _, id := range ids {
		c.WaitFile(kbID, id, 60*time.Second, "indexed")
	}
	second := c.WaitEvaluationRun(kbID, start(), 60*time.Second, nil)
	if m2 := checkRunMetrics(t, second); !jsonSame(m2, metrics) || second["overall_score"] != run["overall_score"] {
		t.Fatalf("after re-indexing: %v (overall %v), before %v (overall %v)", m2, second["overall_score"], metrics, run["overall_score"])
	}
	if list := c.Data("GET", "/api/evaluation/databases/"+kbID+"/runs", nil).([]any); len(list) != 2 {
		t.Fatalf("runs: %d", len(list))
	}
	errs := c.Data("GET", "/api/evaluation/databases/"+kbID+"/runs/"+runID+"?result_filter=answer_errors", nil).(map[string]any)
	for _, it := range errs["items"].([]any) {
		if s := it.(map[string]any)["metrics"].(map[string]any)["score"]; s != 0.0 {
			t.Fatalf("answer_errors lists an item scored %v", s)
		}
	}

	// Deletion: the run, then the dataset.
	c.Data("DELETE", "/api/evaluation/databases/"+kbID+"/runs/"+runID, nil)
	if r := c.Do("GET", "/api/evaluation/databases/"+kbID+"/runs/"+runID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("deleted run: %d %s", r.Status, r.Body)
	}
	c.Data("DELETE", "/api/evaluation/datasets/"+dsID, nil)
	if r := c.Do("GET", "/api/evaluation/datasets/"+dsID+"/download", nil); r.Status != http.StatusNotFound || r.Code() != "dataset_not_found" {
		t.Fatalf("deleted dataset: %d %s", r.Status, r.Body)
	}
}

// checkRunMetrics recomputes every item's metrics from its retrieved chunks
// (§5's formulas, written out here independently) and the run's aggregates
// from the items, and returns the run's metrics.
func checkRunMetrics(t *testing.T, run map[string]any) map[string]float64 {
	t.Helper()
	var sums = map[string]float64{}
	var judged, scoreSum float64
	items := run["items"].([]any)
	for _, raw := range items {
		it := raw.(map[string]any)
		gold := map[string]bool{}
		for _, g := range it["gold_chunk_ids"].([]any) {
			gold[g.(string)] = true
		}
		var ids []string
		for _, ch := range it["retrieved_chunks"].([]any) {
			ids = append(ids, ch.(map[string]any)["metadata"].(map[string]any)["chunk_id"].(string))
		}
		m := it["metrics"].(map[string]any)
		for _, k := range evaluation.KValues {
			top := ids[:min(k, len(ids))]
			hit := 0
			for _, id := range top {
				if gold[id] {
					hit++
				}
			}
			var p, r, f float64
			if len(top) > 0 {
				p = float64(hit) / float64(k)
			}
			r = float64(hit) / float64(len(gold))
			if p+r > 0 {
				f = 2 * p * r / (p + r)
			}
			for name, want := range map[string]float64{fmt.Sprintf("recall@%d", k): r, fmt.Sprintf("f1@%d", k): f} {
				if got := m[name].(float64); math.Abs(got-want) > 1e-9 {
					t.Errorf("item %v %s = %v, want %v", it["item_index"], name, got, want)
				}
				sums[name] += m[name].(float64)
			}
		}
		sums["ndcg@10"] += m["ndcg@10"].(float64)
		if s, ok := m["score"].(float64); ok {
			judged++
			scoreSum += s
			contains := it["generated_answer"] != nil && strings.Contains(it["generated_answer"].(string), *strPtr(it["gold_answer"]))
			if (s == 1) != contains {
				t.Errorf("item %v judged %v for answer %q (gold %q)", it["item_index"], s, it["generated_answer"], it["gold_answer"])
			}
		}
	}
	got := map[string]float64{}
	for k, v := range run["metrics"].(map[string]any) {
		got[k] = v.(float64)
	}
	for k, s := range sums {
		if want := s / float64(len(items)); math.Abs(got[k]-want) > 1e-5 {
			t.Errorf("run %s = %v, want the mean %v", k, got[k], want)
		}
	}
	if judged != float64(len(items)) || math.Abs(got["answer_correctness"]-scoreSum/judged) > 1e-5 || run["overall_score"] != got["answer_correctness"] {
		t.Errorf("answers: %v judged, correctness %v, overall %v, want mean %v", judged, got["answer_correctness"], run["overall_score"], scoreSum/judged)
	}
	return got
}

func strPtr(v any) *string {
	s, _ := v.(string)
	return &s
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// genModel writes a question about the first passage it is given; while
// failing is set it answers 503.
func genModel(s *llmtest.Server, failing *atomic.Bool) {
	s.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if failing.Load() {
			return llmtest.Fail(503, "overloaded")
		}
		passage := between(req.LastUserMessage(), "[片段1]\n", "\n")
		return llmtest.Text(fmt.Sprintf("```json\n{\"query\": \"what does this say: %s\", \"answer\": %q}\n```", passage, passage))
	})
}

// Generation from a KB: a failed generation (the model down) resumed by two
// concurrent calls that share one job, completing with count items, each
// with its anchor and a neighbour as gold chunks; the dataset then runs.
func TestEvaluationDatasetGeneration(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	var failing atomic.Bool
	failing.Store(true)
	genModel(p.LLM, &failing)
	c := p.Admin
	kbID := c.NewKnowledgeBase("generated bench", "generation", nil)
	files := map[string][]byte{}
	for n, d := range evalDocs {
		files[n] = []byte(d)
	}
	c.Ingest(kbID, files, 60*time.Second)
	base := "/api/evaluation/databases/" + kbID + "/datasets"
	if r := c.Do("POST", base+"/generate", map[string]any{"llm_model_spec": "fake:gen", "count": 101}); r.Status != http.StatusBadRequest {
		t.Fatalf("count 101: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", base+"/generate", map[string]any{"llm_model_spec": "fake:gen", "generation_mode": "graph_enhanced"}); r.Status != http.StatusBadRequest {
		t.Fatalf("graph_enhanced without a graph: %d %s", r.Status, r.Body)
	}
	gen := c.Data("POST", base+"/generate", map[string]any{"name": "nightly", "llm_model_spec": "fake:gen", "count": 5,
		"neighbors_count": 1, "concurrency_count": 2}).(map[string]any)
	dsID := gen["dataset_id"].(string)
	status := func() map[string]any {
		for _, d := range c.Data("GET", base, nil).([]any) {
			if d.(map[string]any)["dataset_id"] == dsID {
				return d.(map[string]any)
			}
		}
		t.Fatalf("dataset %s not listed", dsID)
		return nil
	}
	waitStatus := func(want string) map[string]any {
		deadline := time.Now().Add(60 * time.Second)
		for {
			d := status()
			st := d["build_metadata"].(map[string]any)["status"]
			if st == want {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("generation %v, want %s", d, want)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	waitStatus("failed")
	if r := c.Do("GET", base+"/"+dsID, nil); r.Status != http.StatusBadRequest || r.Code() != "dataset_not_ready" {
		t.Fatalf("a failed dataset's detail: %d %s", r.Status, r.Body)
	}

	failing.Store(false)
	answers := make(chan map[string]any, 2)
	for range 2 {
		go func() { answers <- c.Data("POST", base+"/"+dsID+"/resume", nil).(map[string]any) }()
	}
	a, b := <-answers, <-answers
	if a["task_id"] == nil || a["task_id"] != b["task_id"] || a["task_id"] == gen["task_id"] {
		t.Fatalf("concurrent resumes: %v and %v (first job %v)", a, b, gen["task_id"])
	}
	d := waitStatus("completed")
	if d["item_count"] != float64(5) {
		t.Fatalf("generated: %v", d)
	}
	if again := c.Data("POST", base+"/"+dsID+"/resume", nil).(map[string]any); again["message"] != "数据集已完成生成" {
		t.Fatalf("resume of a completed generation: %v", again)
	}
	page := c.Data("GET", base+"/"+dsID+"?page_size=100", nil).(map[string]any)
	for i, raw := range page["items"].([]any) {
		it := raw.(map[string]any)
		gold := it["gold_chunk_ids"].([]any)
		if it["item_index"] != float64(i) || len(gold) != 2 || gold[0] == gold[1] || !strings.HasPrefix(it["query"].(string), "what does this say") {
			t.Fatalf("item %d: %v", i, it)
		}
	}
	run := c.WaitEvaluationRun(kbID, c.Data("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": dsID}).(map[string]any)["run_id"].(string), 60*time.Second, nil)
	if run["status"] != "completed" || run["completed_items"] != float64(5) {
		t.Fatalf("run of the generated dataset: %v", run)
	}
}
