package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// evaluateRouter is a platform's evaluate function.
func evaluateRouter(t *testing.T, p *local.Platform) *faas.Router {
	for _, r := range p.Routers {
		if r.Name() == "evaluate" {
			return r
		}
	}
	t.Fatal("no evaluate router")
	return nil
}

// A schedule fires once per tick across two instances, and its gate passes
// the first run (the baseline) and flags a worse one as regressed, with the
// regression event and the history for charts.
func TestEvaluationScheduleAndGate(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	c := p.Admin
	// A second instance of the platform on the same database and Redis: its
	// own pool, relay and evaluate function (not serving; ticked directly).
	env := p.Stack.Env(nil)
	cfg, err := bootstrap.Load(env.Getenv, env.List(), "0")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := local.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p2.App.Close)
	instances := []*faas.Router{evaluateRouter(t, p.P), evaluateRouter(t, p2)}

	kbID := c.NewKnowledgeBase("scheduled", "nightly", nil)
	files := map[string][]byte{}
	for n, d := range evalDocs {
		files[n] = []byte(d)
	}
	ingested := c.Ingest(kbID, files, 60*time.Second)
	chunkOf := map[string]string{}
	for id, f := range ingested {
		chunkOf[f["original_filename"].(string)] = testkit.FileChunkIDs(t, p.P.App.Pool, id)[0]
	}
	upload := func(name string, gold func(file string) string) string {
		var b bytes.Buffer
		for _, q := range evalQuestions {
			line, _ := json.Marshal(map[string]any{"query": q.query, "gold_chunk_ids": []string{gold(q.file)}})
			b.Write(append(line, '\n'))
		}
		r := c.UploadDataset(kbID, name+".jsonl", name, b.Bytes())
		if r.Status != http.StatusOK {
			t.Fatalf("upload: %d %s", r.Status, r.Body)
		}
		return r.JSON()["data"].(map[string]any)["dataset_id"].(string)
	}
	good := upload("good", func(f string) string { return chunkOf[f] })
	// Gold ids no retrieval returns: recall 0, a regression by construction.
	bad := upload("bad", func(string) string { return "file_000000000000000000000000_0000000000000000" })

	for _, body := range []map[string]any{
		{"kb_id": kbID, "cron": "every day", "dataset_id": good},
		{"kb_id": kbID, "cron": "0 3 * * *", "timezone": "Mars/Olympus", "dataset_id": good},
		{"kb_id": kbID, "cron": "0 3 * * *", "dataset_id": good, "gate": map[string]any{"baseline": "pinned"}},
	} {
		if r := c.Do("POST", "/api/evaluation/schedules", body); r.Status != http.StatusBadRequest {
			t.Fatalf("bad schedule %v: %d %s", body, r.Status, r.Body)
		}
	}
	sc := c.Data("POST", "/api/evaluation/schedules", map[string]any{"kb_id": kbID, "name": "nightly", "cron": "*/5 * * * *",
		"timezone": "Asia/Shanghai", "dataset_id": good, "gate": map[string]any{"metric": "recall@10", "tolerance": 0.05}}).(map[string]any)
	schedID := sc["schedule_id"].(string)
	created, _ := time.Parse(time.RFC3339Nano, sc["created_at"].(string))
	due1 := created.Truncate(5 * time.Minute).Add(5 * time.Minute)

	// Ticks of one minute, each delivered twice to each instance at once
	// (distinct event ids, as distinct schedulers' deliveries would be).
	tick := func(at time.Time) {
		var wg sync.WaitGroup
		for i, r := range instances {
			for j := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ev := cloudevents.NewEvent()
					ev.SetID(fmt.Sprintf("tick-%d-%d-%d", at.Unix(), i, j))
					ev.SetSource("/test/scheduler")
					ev.SetType(events.TypeEvaluationTick)
					_ = ev.SetData(cloudevents.ApplicationJSON, events.EvaluationTick{Time: at.Add(time.Duration(j) * 20 * time.Second).Format(time.RFC3339)})
					if res := r.Deliver(context.Background(), ev); res.Err != nil {
						t.Errorf("tick: %v", res.Err)
					}
				}()
			}
		}
		wg.Wait()
	}
	scheduledRuns := func() []map[string]any {
		var out []map[string]any
		for _, r := range c.Data("GET", "/api/evaluation/databases/"+kbID+"/runs", nil).([]any) {
			if r.(map[string]any)["schedule_id"] == schedID {
				out = append(out, r.(map[string]any))
			}
		}
		return out
	}
	tick(due1.Add(-2 * time.Minute)) // not due yet
	if n := len(scheduledRuns()); n != 0 {
		t.Fatalf("%d runs before the schedule was due", n)
	}
	tick(due1)
	runs := scheduledRuns()
	if len(runs) != 1 {
		t.Fatalf("one tick across two instances started %d runs", len(runs))
	}
	first := c.WaitEvaluationRun(kbID, runs[0]["run_id"].(string), 60*time.Second, nil)
	if first["status"] != "completed" || first["gate_status"] != "passed" {
		t.Fatalf("first scheduled run: %v %v %v", first["status"], first["gate_status"], first["gate"])
	}

	// The template now points at the bad dataset: the next tick's run regresses.
	c.Data("PUT", "/api/evaluation/schedules/"+schedID, map[string]any{"dataset_id": bad})
	tick(due1.Add(5 * time.Minute))
	runs = scheduledRuns()
	if len(runs) != 2 {
		t.Fatalf("%d scheduled runs after the second tick, want 2", len(runs))
	}
	second := c.WaitEvaluationRun(kbID, runs[0]["run_id"].(string), 60*time.Second, nil)
	gate, _ := second["gate"].(map[string]any)
	if second["gate_status"] != "regressed" || gate["baseline_run_id"] != first["run_id"] || gate["value"] != 0.0 {
		t.Fatalf("second run: %v %v", second["gate_status"], gate)
	}
	var regressed int
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE type = $1 AND data->>'run_id' = $2`,
		events.TypeEvaluationRegressed, second["run_id"]).Scan(&regressed); err != nil {
		t.Fatal(err)
	}
	if regressed != 1 {
		t.Fatalf("%d regression events for the regressed run", regressed)
	}
	// The regression shows in the task centre too.
	task := c.OK("GET", "/api/tasks/"+second["run_id"].(string), nil)["task"].(map[string]any)
	if res, _ := task["result"].(map[string]any); res["gate_status"] != "regressed" || !strings.Contains(task["message"].(string), "regressed") {
		t.Fatalf("regressed run as a task: %v", task)
	}
	if task := c.OK("GET", "/api/tasks/"+first["run_id"].(string), nil)["task"].(map[string]any); task["result"].(map[string]any)["gate_status"] != "passed" {
		t.Fatalf("passing run as a task: %v", task)
	}

	hist := c.Data("GET", "/api/evaluation/history?target="+schedID+"&metric=recall@10", nil).(map[string]any)["points"].([]any)
	if len(hist) != 2 || hist[0].(map[string]any)["run_id"] != first["run_id"] || hist[1].(map[string]any)["gate_status"] != "regressed" ||
		hist[1].(map[string]any)["value"] != 0.0 || hist[0].(map[string]any)["value"].(float64) < 0.9 {
		t.Fatalf("history: %v", hist)
	}
	if list := c.Data("GET", "/api/evaluation/schedules", nil).([]any); len(list) != 1 {
		t.Fatalf("schedules: %v", list)
	}
	c.Data("DELETE", "/api/evaluation/schedules/"+schedID, nil)
	if r := c.Do("GET", "/api/evaluation/schedules/"+schedID, nil); r.Status != http.StatusNotFound {
		t.Fatalf("deleted schedule: %d", r.Status)
	}
}
