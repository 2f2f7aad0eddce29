package crash

// Agent evaluation suite runs under SIGKILL: the process dies after a
// batch's agent samples ran but before the batch committed; after the
// restart the run completes with every item once, the redone batch replays
// the agent runs it had started (the same request ids) instead of starting
// new ones, and its metrics equal an uninterrupted run's.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestAgentEvaluationSuiteSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	st := testkit.NewStack(t)
	st.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		msg := req.LastUserMessage()
		if strings.HasSuffix(msg, "7") { // tasks ending in 7 are answered wrong
			return llmtest.Text("wrong")
		}
		return llmtest.Text("answer to " + msg)
	})
	port := testkit.FreePort(t)
	env := ingestEnv(st, port)
	p := testkit.StartProc(t, bin, ingestEnv(st, port, "YUXI_CRASH_AT", "evaluate.batch_evaluated:2"), "/api/system/health")
	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := (&testkit.Client{T: t, Base: p.URL}).Login("admin", "admin-password")
	var items []map[string]any
	for i := range 25 {
		items = append(items, map[string]any{"input": fmt.Sprintf("task %d", i)})
	}
	suiteID := c.Data("POST", "/api/evaluation/suites", map[string]any{"name": "crash suite", "agent_slug": "default-chatbot", "items": items,
		"concurrency": 4, "checks": []map[string]any{{"type": "contains", "value": "answer to"}}}).(map[string]any)["suite_id"].(string)
	r, err := c.TryDo("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{})
	if err != nil || r.Status != 200 {
		t.Fatalf("start: %v %d %s", err, r.Status, r.Body)
	}
	crashed := r.JSON()["data"].(map[string]any)["run_id"].(string)
	if !p.Exited(60 * time.Second) {
		t.Fatalf("crash point never reached\n%s", p.Logs.String())
	}
	var committed, started int
	ctx := context.Background()
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM evaluation_suite_run_items WHERE run_id = $1`, crashed).Scan(&committed)
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM agent_run_requests WHERE request_id LIKE $1`, "eval-"+crashed+"-%").Scan(&started)
	t.Logf("crashed with %d items committed, %d agent samples started", committed, started)
	if committed != 10 || started <= committed {
		t.Fatalf("at the crash: %d items committed (want the first batch of 10), %d samples started (want the second batch's too)", committed, started)
	}

	p = testkit.StartProc(t, bin, env, "/api/system/health")
	c.Base = p.URL
	resumed := c.WaitSuiteRun(suiteID, crashed, 90*time.Second)
	whole := c.WaitSuiteRun(suiteID, c.Data("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{}).(map[string]any)["run_id"].(string), 90*time.Second)
	for _, run := range []map[string]any{resumed, whole} {
		if run["status"] != "completed" || run["completed_items"] != 25.0 || len(run["items"].([]any)) != 25 {
			t.Fatalf("run %v: %v, %v completed", run["run_id"], run["status"], run["completed_items"])
		}
	}
	if resumed["overall_score"] != whole["overall_score"] || resumed["overall_score"] != 23.0/25 {
		t.Fatalf("resumed pass rate %v, uninterrupted %v, want %v", resumed["overall_score"], whole["overall_score"], 23.0/25)
	}
	var requests, runs int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM agent_run_requests WHERE request_id LIKE $1`, "eval-"+crashed+"-%").Scan(&requests)
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM agent_runs r JOIN agent_run_requests q ON q.dispatched_run_id = r.id
		WHERE q.request_id LIKE $1`, "eval-"+crashed+"-%").Scan(&runs)
	if requests != 25 || runs != 25 {
		t.Fatalf("the resumed run made %d requests and %d agent runs for 25 items", requests, runs)
	}
	if t.Failed() {
		t.Logf("process log:\n%s", p.Logs.String())
	}
}
