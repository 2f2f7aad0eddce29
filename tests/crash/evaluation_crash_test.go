package crash

// RAG evaluation runs under SIGKILL: the all-in-one process dies while a
// run's batch is evaluated (nothing of the batch committed) or right after
// a batch committed, is restarted on the same database, and the run must
// complete with every item once and the same metrics as an uninterrupted
// run of the same dataset.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestEvaluationRunSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	for _, point := range []string{"evaluate.batch_evaluated:2", "evaluate.batch_committed:1"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			runEvaluationCrash(t, bin, point)
		})
	}
}

func runEvaluationCrash(t *testing.T, bin, crashAt string) {
	st := testkit.NewStack(t)
	port := testkit.FreePort(t)
	env := ingestEnv(st, port)
	p := testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_CRASH_AT", crashAt), "/api/system/health")
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	kbID := c.NewKnowledgeBase("eval-crash", "evaluation under SIGKILL", nil)
	const files = 6
	docs := map[string][]byte{}
	for i := 0; i < files; i++ {
		docs[fmt.Sprintf("part-%02d.md", i)] = document(i, 8, 3)
	}
	c.Ingest(kbID, docs, 40*time.Second)
	ids := testkit.WaitKBFilesIndexed(t, pool, kbID, files, 40*time.Second)
	// 25 items: three batches of 10, 10 and 5. Each asks for a file's
	// marker; its gold ids are every chunk of that file.
	var jsonl bytes.Buffer
	for i := 0; i < 25; i++ {
		f := i % files
		var fileID string
		for _, id := range ids {
			var name string
			_ = pool.QueryRow(context.Background(), `SELECT filename FROM knowledge_files WHERE file_id = $1`, id).Scan(&name)
			if name == fmt.Sprintf("part-%02d.md", f) {
				fileID = id
			}
		}
		line, _ := json.Marshal(map[string]any{"query": fmt.Sprintf("escalation contact %s rule %d", marker(f), i),
			"gold_chunk_ids": testkit.FileChunkIDs(t, pool, fileID)})
		jsonl.Write(append(line, '\n'))
	}
	up := c.UploadDataset(kbID, "crash.jsonl", "crash bench", jsonl.Bytes())
	if up.Status != http.StatusOK {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	dsID := up.JSON()["data"].(map[string]any)["dataset_id"].(string)
	r, err := c.TryDo("POST", "/api/evaluation/databases/"+kbID+"/runs", map[string]any{"dataset_id": dsID})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("start run: %v %d %s", err, r.Status, r.Body)
	}
	crashed := r.JSON()["data"].(map[string]any)["run_id"].(string)
	if !p.Exited(30 * time.Second) {
		t.Fatalf("crash point %s was never reached\n%s", crashAt, p.Logs.String())
	}
	var committed int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM evaluation_run_items WHERE run_id = $1`, crashed).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	t.Logf("crashed at %s with %d items committed", crashAt, committed)
	if committed%10 != 0 || committed >= 25 {
		t.Fatalf("%d items committed at the crash: batches commit whole", committed)
	}

	p = testkit.StartProc(t, bin, env, "/api/system/health")
	c.Base = p.URL
	resumed := c.WaitEvaluationRun(kbID, crashed, 60*time.Second, nil)
	whole := c.WaitEvaluationRun(kbID, c.Data("POST", "/api/evaluation/databases/"+kbID+"/runs",
		map[string]any{"dataset_id": dsID}).(map[string]any)["run_id"].(string), 60*time.Second, nil)
	for _, run := range []map[string]any{resumed, whole} {
		if run["status"] != "completed" || run["completed_items"] != float64(25) || len(run["items"].([]any)) != 25 {
			t.Fatalf("run %v: %v, %v completed, %d items", run["run_id"], run["status"], run["completed_items"], len(run["items"].([]any)))
		}
	}
	if !sameJSON(resumed["metrics"], whole["metrics"]) || resumed["overall_score"] != whole["overall_score"] {
		t.Fatalf("resumed run's metrics %v (overall %v) differ from an uninterrupted run's %v (overall %v)",
			resumed["metrics"], resumed["overall_score"], whole["metrics"], whole["overall_score"])
	}
	if m := resumed["metrics"].(map[string]any); m["recall@10"] == nil || m["ndcg@10"] == nil {
		t.Fatalf("metrics: %v", m)
	}
	for i, it := range resumed["items"].([]any) {
		if !sameJSON(it.(map[string]any)["metrics"], whole["items"].([]any)[i].(map[string]any)["metrics"]) {
			t.Errorf("item %d: %v vs %v", i, it.(map[string]any)["metrics"], whole["items"].([]any)[i].(map[string]any)["metrics"])
		}
	}
	if t.Failed() {
		t.Logf("process log:\n%s", p.Logs.String())
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Benchmark generation killed after a batch's questions were written but
// before they committed: after the restart the dataset completes with count
// items, one per slot, none twice.
func TestDatasetGenerationSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	st := testkit.NewStack(t)
	st.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		msg := req.LastUserMessage()
		i := strings.Index(msg, "[片段1]\n")
		passage := strings.SplitN(msg[i+len("[片段1]\n"):], "\n", 2)[0]
		return llmtest.Text(fmt.Sprintf(`{"query": "about: %s", "answer": "yes"}`, passage))
	})
	port := testkit.FreePort(t)
	env := ingestEnv(st, port)
	p := testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_CRASH_AT", "evaluate.dataset_batch_generated:2"), "/api/system/health")
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	kbID := c.NewKnowledgeBase("gen-crash", "generation under SIGKILL", nil)
	docs := map[string][]byte{}
	for i := 0; i < 4; i++ {
		docs[fmt.Sprintf("part-%02d.md", i)] = document(i, 8, 3)
	}
	c.Ingest(kbID, docs, 40*time.Second)
	r, err := c.TryDo("POST", "/api/evaluation/databases/"+kbID+"/datasets/generate",
		map[string]any{"llm_model_spec": "fake:gen", "count": 9, "concurrency_count": 3, "neighbors_count": 1})
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("generate: %v %d %s", err, r.Status, r.Body)
	}
	dsID := r.JSON()["data"].(map[string]any)["dataset_id"].(string)
	if !p.Exited(30 * time.Second) {
		t.Fatalf("the crash point was never reached\n%s", p.Logs.String())
	}
	var before int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM evaluation_dataset_items WHERE dataset_id = $1`, dsID).Scan(&before)
	t.Logf("killed with %d items committed", before)
	p = testkit.StartProc(t, bin, env, "/api/system/health")
	c.Base = p.URL
	deadline := time.Now().Add(60 * time.Second)
	for {
		var status string
		var items, distinct, max int
		if err := pool.QueryRow(context.Background(), `SELECT d.build_metadata->>'status', count(i.*), count(DISTINCT i.item_index), coalesce(max(i.item_index), -1)
			FROM evaluation_datasets d LEFT JOIN evaluation_dataset_items i USING (dataset_id) WHERE d.dataset_id = $1 GROUP BY d.build_metadata`,
			dsID).Scan(&status, &items, &distinct, &max); err != nil {
			t.Fatal(err)
		}
		if status == "completed" {
			if items != 9 || distinct != 9 || max != 8 {
				t.Fatalf("completed with %d items (%d distinct slots, last %d), want 9 slots once each", items, distinct, max)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %s with %d items after the restart\n%s", status, items, p.Logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
