package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// The task centre asks the owners to stop (issue 9): an evaluation run and
// a dataset generation, each cancelled while a batch is in flight, finish
// that batch and stop at its boundary, recording cancelled (a cancelled
// generation resumes); a knowledge-graph build is a task of its own, read
// from the graph's owner, that cannot be cancelled (a clear code) and,
// once finished, can be dismissed.
func TestTasksCancelEvaluationsAndShowGraphBuilds(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	gates := map[string]chan struct{}{"answerer": make(chan struct{}), "gen": make(chan struct{})}
	entered := map[string]chan struct{}{"answerer": make(chan struct{}, 64), "gen": make(chan struct{}, 64)}
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		msg := req.LastUserMessage()
		switch req.Model {
		case "extract":
			if i := strings.Index(msg, "Text:\n"); i >= 0 {
				msg = msg[i+len("Text:\n"):]
			}
			b, _ := json.Marshal(testkit.ExtractGraph(msg))
			return llmtest.Text(string(b))
		case "judge":
			return llmtest.Text(`{"score": 1, "reasoning": "ok"}`)
		case "answerer", "gen":
			entered[req.Model] <- struct{}{}
			<-gates[req.Model] // held until the test has cancelled
			if req.Model == "answerer" {
				return llmtest.Text("an answer")
			}
			passage := between(msg, "[片段1]\n", "\n")
			return llmtest.Text(fmt.Sprintf(`{"query": "what does this say: %s", "answer": %q}`, passage, passage))
		}
		return llmtest.Text("?")
	})
	c := p.Admin
	kbID := c.NewKnowledgeBase("task centre", "cancellable work", nil)
	c.OK("POST", "/api/knowledge/databases/"+kbID+"/graph-build/config", map[string]any{"llm_model_spec": "fake:extract", "entity_types": []string{"Thing"}})
	files := map[string][]byte{}
	for n, d := range evalDocs {
		files[n] = []byte(d)
	}
	c.Ingest(kbID, files, 60*time.Second)
	task := func(id string) map[string]any { return c.OK("GET", "/api/tasks/"+id, nil)["task"].(map[string]any) }
	refused := func(id, code string) {
		t.Helper()
		if r := c.Do("POST", "/api/tasks/"+id+"/cancel", nil); r.Status != http.StatusBadRequest || r.Code() != code {
			t.Fatalf("cancel %s: %d %s, want 400 %s", id, r.Status, r.Body, code)
		}
	}

	// An evaluation run: 12 items, batches of 10; cancelled during batch 0.
	var jsonl strings.Builder
	for _, q := range evalQuestions {
		line, _ := json.Marshal(map[string]any{"query": q.query, "gold_answer": q.answer})
		jsonl.Write(append(line, '\n'))
	}
	up := c.UploadDataset(kbID, "bench.jsonl", "bench", []byte(jsonl.String()))
	if up.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	dsID := up.JSON()["data"].(map[string]any)["dataset_id"].(string)
	runID := c.Data("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": dsID,
		"model_config": map[string]any{"answer_llm": "fake:answerer", "judge_llm": "fake:judge"}}).(map[string]any)["run_id"].(string)
	<-entered["answerer"] // batch 0 is evaluating
	c.OK("POST", "/api/tasks/"+runID+"/cancel", nil)
	if got := task(runID); got["status"] != "running" || got["cancel_requested"] != true || got["type"] != "rag_evaluation" {
		t.Fatalf("a run asked to stop: %v", got)
	}
	refused(runID, "task_not_cancellable") // once
	close(gates["answerer"])
	run := c.WaitEvaluationRun(kbID, runID, 60*time.Second, nil)
	done := run["completed_items"].(float64)
	if run["status"] != "cancelled" || done == 0 || done >= float64(len(evalQuestions)) || len(run["items"].([]any)) != int(done) {
		t.Fatalf("cancelled run: status %v, %v of %v items, %d results", run["status"], done, run["total_items"], len(run["items"].([]any)))
	}
	if got := task(runID); got["status"] != "cancelled" || got["completed_at"] == nil {
		t.Fatalf("cancelled run's task: %v", got)
	}
	refused(runID, "task_not_cancellable")

	// A generation: 6 questions, 2 a batch; cancelled during batch 0.
	base := "/api/evaluation/databases/" + kbID + "/datasets"
	gen := c.Data("POST", base+"/generate", map[string]any{"name": "nightly", "llm_model_spec": "fake:gen", "count": 6,
		"concurrency_count": 2}).(map[string]any)
	genDS, genTask := gen["dataset_id"].(string), gen["task_id"].(string)
	<-entered["gen"]
	c.OK("POST", "/api/tasks/"+genTask+"/cancel", nil)
	if got := task(genTask); got["cancel_requested"] != true || got["status"] == "cancelled" {
		t.Fatalf("a generation asked to stop: %v", got)
	}
	close(gates["gen"])
	dataset := func() map[string]any {
		for _, d := range c.Data("GET", base, nil).([]any) {
			if d.(map[string]any)["dataset_id"] == genDS {
				return d.(map[string]any)
			}
		}
		t.Fatalf("dataset %s not listed", genDS)
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for task(genTask)["status"] != "cancelled" {
		if time.Now().After(deadline) {
			t.Fatalf("generation not cancelled: %v", task(genTask))
		}
		time.Sleep(25 * time.Millisecond) // batches run on events the test cannot wait on
	}
	if d := dataset(); d["build_metadata"].(map[string]any)["status"] != "cancelled" || d["item_count"] != float64(2) {
		t.Fatalf("cancelled generation: %v", d)
	}
	// A cancelled generation resumes (a new task) and completes.
	res := c.Data("POST", base+"/"+genDS+"/resume", nil).(map[string]any)
	if res["task_id"] == nil || res["task_id"] == genTask {
		t.Fatalf("resume: %v", res)
	}
	for deadline = time.Now().Add(60 * time.Second); dataset()["build_metadata"].(map[string]any)["status"] != "completed"; {
		if time.Now().After(deadline) {
			t.Fatalf("resumed generation: %v", dataset())
		}
		time.Sleep(25 * time.Millisecond)
	}
	if d := dataset(); d["item_count"] != float64(6) {
		t.Fatalf("resumed generation: %v", d)
	}

	// The graph build: a task read from the graph's owner, not cancellable.
	c.WaitGraphBuilt(kbID, 60*time.Second)
	graphTask := "graph_" + kbID
	got := task(graphTask)
	if got["type"] != "knowledge_graph_build" || got["status"] != "success" || got["progress"] != float64(100) || got["kb_id"] != kbID ||
		got["result"].(map[string]any)["done_chunks"] != float64(len(evalDocs)) {
		t.Fatalf("graph build task: %v", got)
	}
	listed := false
	for _, x := range c.OK("GET", "/api/tasks?status=success", nil)["tasks"].([]any) {
		listed = listed || x.(map[string]any)["id"] == graphTask
	}
	if !listed {
		t.Fatalf("graph build not listed")
	}
	refused(graphTask, "graph_build_not_cancellable")
	c.OK("DELETE", "/api/tasks/"+graphTask, nil)
	if r := c.Do("GET", "/api/tasks/"+graphTask, nil); r.Status != http.StatusNotFound || r.Code() != "task_not_found" {
		t.Fatalf("dismissed graph build: %d %s", r.Status, r.Body)
	}
}
