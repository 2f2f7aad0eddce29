package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const judgeMarker = "You are a strict evaluator"

// suiteModel answers the agent by its task and the judge by the output it
// is shown: the task "capital of France" gets "Paris"; "json" a JSON
// object; "use a tool" a tool call, then "done"; anything else "no idea".
// The judge scores 1 when the output mentions Paris, else 0.2.
func suiteModel(req llmtest.ChatRequest) llmtest.Reply {
	last := req.LastUserMessage()
	if strings.Contains(last, judgeMarker) {
		if strings.Contains(last, "Agent's output:\nParis") {
			return llmtest.Text("```json\n{\"score\": 1, \"reasoning\": \"names the capital\"}\n```")
		}
		return llmtest.Text(`{"score": 0.2, "reasoning": "off"}`)
	}
	switch {
	case strings.Contains(last, "capital of France"):
		return llmtest.Text("Paris")
	case strings.Contains(last, "json"):
		return llmtest.Text(`{"answer": 42}`)
	case strings.Contains(last, "use a tool"):
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
			return llmtest.Text("done")
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "t1", Name: "mark_for_improvement", Arguments: `{"reason":"suite"}`}}}
	}
	return llmtest.Text("no idea")
}

// An agent evaluation suite runs its items through the normal run path
// (source agent_evaluation, bounded concurrency), records output,
// trajectory, check outcomes and judge score per item, aggregates a pass
// rate; a schedule on the suite fires once per tick and its gate flags a
// worse run as regressed, posting to the schedule's webhook and showing in
// the owner's task list. The owner is a plain user: suites, their
// schedules, history and tasks are every user's own.
func TestAgentEvaluationSuite(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": "127.0.0.1/32"})
	c := p.Admin.CreateUser("suite-owner", "user", nil)
	p.LLM.Handle(suiteModel)

	// A local webhook receiver.
	var hookMu sync.Mutex
	var hooks []map[string]any
	hookGot := make(chan struct{}, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["delivery"] = r.Header.Get("X-Yuxi-Delivery")
		hookMu.Lock()
		hooks = append(hooks, m)
		hookMu.Unlock()
		hookGot <- struct{}{}
	}))
	t.Cleanup(recv.Close)

	paris := "Paris"
	items := []map[string]any{
		{"input": "What is the capital of France?", "expected_output": paris, "checks": []map[string]any{
			{"type": "contains", "value": "paris"}, {"type": "judge", "prompt": "names the right capital", "threshold": 0.8}}},
		{"input": "answer in json", "checks": []map[string]any{
			{"type": "json_schema", "schema": map[string]any{"type": "object", "required": []string{"answer"},
				"properties": map[string]any{"answer": map[string]any{"type": "integer"}}}},
			{"type": "regex", "pattern": `"answer"\s*:\s*\d+`}}},
		{"input": "something obscure", "checks": []map[string]any{{"type": "contains", "value": "never-there"}}},
		{"input": "please use a tool"},
	}
	// Refusals: 4xx with a code, nothing stored.
	for _, bad := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"name": "s", "agent_slug": "default-chatbot"}, 400, "empty_suite"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "items": []map[string]any{{"input": "x", "checks": []map[string]any{{"type": "vibes"}}}}}, 400, "invalid_check"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "items": []map[string]any{{"input": "x", "checks": []map[string]any{{"type": "regex", "pattern": "("}}}}}, 400, "invalid_check"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "items": []map[string]any{{"input": "x", "checks": []map[string]any{{"type": "json_schema", "schema": map[string]any{"$ref": "https://evil.example/s.json"}}}}}}, 400, "invalid_check"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "items": items}, 400, "missing_judge_llm"},
		{map[string]any{"name": "s", "agent_slug": "no-such-agent", "items": []map[string]any{{"input": "x"}}}, 404, "agent_not_found"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "concurrency": 99, "items": []map[string]any{{"input": "x"}}}, 400, "invalid_concurrency"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "langfuse_dataset": "ds"}, 400, "langfuse_unconfigured"},
		{map[string]any{"name": "s", "agent_slug": "default-chatbot", "items": "nope"}, 422, "invalid_request"},
	} {
		if r := c.Do("POST", "/api/evaluation/suites", bad.body); r.Status != bad.status || r.Code() != bad.code {
			t.Errorf("bad suite %v: %d %s, want %d %s", bad.body, r.Status, r.Body, bad.status, bad.code)
		}
	}
	if n := len(c.Data("GET", "/api/evaluation/suites", nil).([]any)); n != 0 {
		t.Fatalf("%d suites stored after refusals", n)
	}

	suite := c.Data("POST", "/api/evaluation/suites", map[string]any{"name": "smoke", "agent_slug": "default-chatbot", "items": items,
		"concurrency": 2, "timeout_seconds": 60, "judge_llm": "fake:judge"}).(map[string]any)
	suiteID := suite["suite_id"].(string)
	runID := c.Data("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{"name": "first"}).(map[string]any)["run_id"].(string)
	run := c.WaitSuiteRun(suiteID, runID, 90*time.Second)
	if run["status"] != "completed" || run["completed_items"] != 4.0 || run["name"] != "first" {
		t.Fatalf("suite run: %v", run)
	}
	m := run["metrics"].(map[string]any)
	if m["pass_rate"] != 0.75 || m["items"] != 4.0 || m["passed"] != 3.0 || m["check_pass_rate.contains"] != 0.5 ||
		m["check_pass_rate.json_schema"] != 1.0 || m["judge_score"] != 1.0 || run["overall_score"] != 0.75 || m["avg_tool_calls"] != 0.25 {
		t.Fatalf("metrics: %v overall %v", m, run["overall_score"])
	}
	got := run["items"].([]any)
	if len(got) != 4 {
		t.Fatalf("%d items", len(got))
	}
	it0, it2, it3 := got[0].(map[string]any), got[2].(map[string]any), got[3].(map[string]any)
	if it0["output"] != "Paris" || it0["passed"] != true || it0["judge_score"] != 1.0 || it0["expected_output"] != paris {
		t.Errorf("item 0: %v", it0)
	}
	checks0 := it0["checks"].([]any)
	if len(checks0) != 2 || checks0[1].(map[string]any)["reasoning"] != "names the capital" {
		t.Errorf("item 0 checks: %v", checks0)
	}
	if it2["passed"] != false || it2["output"] != "no idea" || it2["checks"].([]any)[0].(map[string]any)["passed"] != false {
		t.Errorf("item 2: %v", it2)
	}
	traj := it3["trajectory_summary"].(map[string]any)
	if it3["output"] != "done" || it3["passed"] != true || traj["tool_call_count"] != 1.0 || traj["step_count"] != 2.0 {
		t.Errorf("item 3: %v", it3)
	}
	// Through the normal run path: the agent's run is the caller's, source
	// agent_evaluation, request id derived from the suite run and item.
	ar := c.OK("GET", "/api/agent/runs/"+it0["agent_run_id"].(string), nil)["run"].(map[string]any)
	if ar["source"] != "agent_evaluation" || ar["request_id"] != fmt.Sprintf("eval-%s-0", runID) {
		t.Errorf("agent run: source %v request %v", ar["source"], ar["request_id"])
	}
	// Another user sees nothing of the suite.
	bob := p.Admin.CreateUser("suite-bob", "user", nil)
	for _, path := range []string{"/api/evaluation/suites/" + suiteID, "/api/evaluation/suites/" + suiteID + "/runs",
		"/api/evaluation/suites/" + suiteID + "/runs/" + runID} {
		if r := bob.Do("GET", path, nil); r.Status != 404 || r.Code() != "suite_not_found" {
			t.Errorf("bob: GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := bob.Do("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "cron": "* * * * *"}); r.Status != 404 {
		t.Errorf("bob schedules another's suite: %d %s", r.Status, r.Body)
	}
	if r := bob.Do("GET", "/api/evaluation/suites", nil); strings.Contains(string(r.Body), suiteID) {
		t.Errorf("bob lists the suite: %s", r.Body)
	}

	// A schedule on the suite, gated on pass_rate, with a webhook; a denied
	// webhook is refused on save.
	if r := c.Do("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "cron": "*/5 * * * *",
		"webhook_url": "http://169.254.169.254/hook"}); r.Status != 422 || r.Code() != "outbound_denied" {
		t.Errorf("metadata webhook: %d %s", r.Status, r.Body)
	}
	if r := c.Do("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "cron": "*/5 * * * *", "dataset_id": "x"}); r.Status != 400 {
		t.Errorf("suite schedule with a dataset: %d %s", r.Status, r.Body)
	}
	sc := c.Data("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "name": "nightly agent", "cron": "*/5 * * * *",
		"timezone": "Europe/Paris", "gate": map[string]any{"tolerance": 0.1}, "webhook_url": recv.URL + "/hook"}).(map[string]any)
	schedID := sc["schedule_id"].(string)
	if sc["gate"].(map[string]any)["metric"] != "pass_rate" {
		t.Errorf("suite gate metric defaults to pass_rate: %v", sc["gate"])
	}
	// The owner lists, changes and deletes her suite's schedules; others see none.
	spare := c.Data("POST", "/api/evaluation/schedules", map[string]any{"suite_id": suiteID, "cron": "0 1 * * *"}).(map[string]any)["schedule_id"].(string)
	if got := c.Data("PUT", "/api/evaluation/schedules/"+spare, map[string]any{"name": "spare", "enabled": false}).(map[string]any); got["name"] != "spare" || got["enabled"] != false {
		t.Errorf("updated schedule: %v", got)
	}
	if list := c.Data("GET", "/api/evaluation/schedules", nil).([]any); len(list) != 2 {
		t.Errorf("the owner's schedules: %v", list)
	}
	c.Data("DELETE", "/api/evaluation/schedules/"+spare, nil)
	if r := c.Do("GET", "/api/evaluation/schedules/"+spare, nil); r.Status != 404 {
		t.Errorf("deleted schedule: %d %s", r.Status, r.Body)
	}
	if r := bob.Do("GET", "/api/evaluation/schedules", nil); strings.Contains(string(r.Body), schedID) {
		t.Errorf("bob lists the schedule: %s", r.Body)
	}
	created, _ := time.Parse(time.RFC3339Nano, sc["created_at"].(string))
	due := created.Truncate(5 * time.Minute).Add(5 * time.Minute)
	router := evaluateRouter(t, p.P)
	tick := func(at time.Time) {
		var wg sync.WaitGroup
		for j := range 3 { // one tick delivered three times at once
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev := cloudevents.NewEvent()
				ev.SetID(fmt.Sprintf("suite-tick-%d-%d", at.Unix(), j))
				ev.SetSource("/test/scheduler")
				ev.SetType(events.TypeEvaluationTick)
				_ = ev.SetData(cloudevents.ApplicationJSON, events.EvaluationTick{Time: at.Format(time.RFC3339)})
				if res := router.Deliver(context.Background(), ev); res.Err != nil {
					t.Errorf("tick: %v", res.Err)
				}
			}()
		}
		wg.Wait()
	}
	scheduled := func() []map[string]any {
		var out []map[string]any
		for _, r := range c.Data("GET", "/api/evaluation/suites/"+suiteID+"/runs", nil).([]any) {
			if r.(map[string]any)["schedule_id"] == schedID {
				out = append(out, r.(map[string]any))
			}
		}
		return out
	}
	tick(due)
	runs := scheduled()
	if len(runs) != 1 {
		t.Fatalf("one tick started %d suite runs", len(runs))
	}
	first := c.WaitSuiteRun(suiteID, runs[0]["run_id"].(string), 90*time.Second)
	if first["gate_status"] != "passed" || first["overall_score"] != 0.75 {
		t.Fatalf("first scheduled suite run: %v %v %v", first["gate_status"], first["gate"], first["overall_score"])
	}
	// Worse items: the next tick's run regresses.
	c.Data("PUT", "/api/evaluation/suites/"+suiteID, map[string]any{"items": []map[string]any{
		{"input": "something obscure", "checks": []map[string]any{{"type": "contains", "value": "never-there"}}},
		{"input": "What is the capital of France?", "checks": []map[string]any{{"type": "contains", "value": "Paris", "case_sensitive": true}}},
	}})
	tick(due.Add(5 * time.Minute))
	runs = scheduled()
	if len(runs) != 2 {
		t.Fatalf("%d scheduled suite runs after the second tick", len(runs))
	}
	second := c.WaitSuiteRun(suiteID, runs[0]["run_id"].(string), 90*time.Second)
	gate := second["gate"].(map[string]any)
	if second["gate_status"] != "regressed" || gate["value"] != 0.5 || gate["baseline"] != 0.75 || gate["baseline_run_id"] != first["run_id"] {
		t.Fatalf("second scheduled suite run: %v %v", second["gate_status"], gate)
	}
	select {
	case <-hookGot:
	case <-time.After(30 * time.Second):
		t.Fatal("no regression webhook")
	}
	hookMu.Lock()
	h := hooks[0]
	hookMu.Unlock()
	data := h["data"].(map[string]any)
	if h["type"] != events.TypeEvaluationRegressed || data["run_id"] != second["run_id"] || data["suite_id"] != suiteID ||
		data["metric"] != "pass_rate" || h["delivery"] != "evaluation-regressed:"+second["run_id"].(string) {
		t.Errorf("webhook: %v", h)
	}
	// History for charts, by suite and by schedule.
	for _, target := range []string{suiteID, schedID} {
		pts := c.Data("GET", "/api/evaluation/history?target="+target+"&metric=pass_rate", nil).(map[string]any)["points"].([]any)
		want := 3
		if target == schedID {
			want = 2
		}
		if len(pts) != want || pts[len(pts)-1].(map[string]any)["value"] != 0.5 || pts[len(pts)-1].(map[string]any)["gate_status"] != "regressed" {
			t.Errorf("history %s: %v", target, pts)
		}
	}
	if r := bob.Do("GET", "/api/evaluation/history?target="+suiteID, nil); r.Status != 404 {
		t.Errorf("bob reads the suite's history: %d %s", r.Status, r.Body)
	}
	if pts := c.Data("GET", "/api/evaluation/history?metric=pass_rate", nil).(map[string]any)["points"].([]any); len(pts) != 3 {
		t.Errorf("the owner's history without a target: %v", pts)
	}
	// The regressed run is in the owner's task list, and only there.
	var regressed map[string]any
	for _, x := range c.OK("GET", "/api/tasks", nil)["tasks"].([]any) {
		if x := x.(map[string]any); x["id"] == second["run_id"] {
			regressed = x
		}
	}
	if regressed == nil || regressed["type"] != "agent_evaluation" || regressed["gate_status"] != "regressed" ||
		!strings.Contains(regressed["message"].(string), "regressed") || regressed["status"] != "success" {
		t.Errorf("the regressed run as a task: %v", regressed)
	}
	task := c.OK("GET", "/api/tasks/"+second["run_id"].(string), nil)["task"].(map[string]any)
	if task["result"].(map[string]any)["gate_status"] != "regressed" || task["payload"].(map[string]any)["schedule_id"] != schedID {
		t.Errorf("the regressed run's task: %v", task)
	}
	if r := bob.Do("GET", "/api/tasks", nil); strings.Contains(string(r.Body), second["run_id"].(string)) {
		t.Errorf("bob's task list has the owner's run: %s", r.Body)
	}
	// Deleting the suite deletes its runs and schedules.
	c.Data("DELETE", "/api/evaluation/suites/"+suiteID, nil)
	if r := c.Do("GET", "/api/evaluation/schedules/"+schedID, nil); r.Status != 404 {
		t.Errorf("schedule after its suite was deleted: %d %s", r.Status, r.Body)
	}
}

// fakeLangfuse serves the three public API endpoints suites use, checking
// Basic auth, and records what is written.
type fakeLangfuse struct {
	mu        sync.Mutex
	ingested  []map[string]any
	runItems  []map[string]any
	itemReads int
}

func (f *fakeLangfuse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != "pk-test" || p != "sk-test" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/api/public/dataset-items":
		f.itemReads++
		if r.URL.Query().Get("datasetName") != "capitals" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"dataset not found"}`))
			return
		}
		page := r.URL.Query().Get("page")
		items := map[string]string{
			"1": `[{"id":"lf-item-1","status":"ACTIVE","input":{"question":"What is the capital of France?"},"expectedOutput":"Paris"},
			       {"id":"lf-item-archived","status":"ARCHIVED","input":"ignored"}]`,
			"2": `[{"id":"lf-item-2","status":"ACTIVE","input":"something obscure","expectedOutput":{"output":"Paris"}}]`,
		}[page]
		if items == "" {
			items = "[]"
		}
		fmt.Fprintf(w, `{"data":%s,"meta":{"page":%s,"limit":100,"totalItems":3,"totalPages":2}}`, items, page)
	case r.Method == "POST" && r.URL.Path == "/api/public/ingestion":
		var body struct {
			Batch []map[string]any `json:"batch"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.ingested = append(f.ingested, body.Batch...)
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = w.Write([]byte(`{"successes":[],"errors":[]}`))
	case r.Method == "POST" && r.URL.Path == "/api/public/dataset-run-items":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.runItems = append(f.runItems, body)
		_, _ = w.Write([]byte(`{"id":"dri"}`))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// With LANGFUSE_* configured, a suite reads its items from a Langfuse
// dataset (paged, archived items skipped, the input's question field) when
// a run starts, applies the suite's checks to each, and writes the results
// back as an experiment: a trace and scores per item, and a dataset run
// item linking each trace to its dataset item under the run's name.
func TestAgentEvaluationSuiteFromLangfuse(t *testing.T) {
	t.Parallel()
	lf := &fakeLangfuse{}
	srv := httptest.NewServer(lf)
	t.Cleanup(srv.Close)
	p := testkit.StartLocal(t, testkit.Env{"LANGFUSE_BASE_URL": srv.URL, "LANGFUSE_PUBLIC_KEY": "pk-test", "LANGFUSE_SECRET_KEY": "sk-test"})
	c := p.Admin
	p.LLM.Handle(suiteModel)

	suiteID := c.Data("POST", "/api/evaluation/suites", map[string]any{"name": "from langfuse", "agent_slug": "default-chatbot",
		"langfuse_dataset": "capitals", "checks": []map[string]any{{"type": "contains", "value": "paris"}}}).(map[string]any)["suite_id"].(string)
	runID := c.Data("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{"name": "lf-experiment-1"}).(map[string]any)["run_id"].(string)
	run := c.WaitSuiteRun(suiteID, runID, 90*time.Second)
	if run["status"] != "completed" || run["total_items"] != 2.0 || run["overall_score"] != 0.5 {
		t.Fatalf("run: %v", run)
	}
	items := run["items"].([]any)
	i0, i1 := items[0].(map[string]any), items[1].(map[string]any)
	if i0["input"] != "What is the capital of France?" || i0["expected_output"] != "Paris" || i0["passed"] != true ||
		i1["input"] != "something obscure" || i1["passed"] != false {
		t.Fatalf("items: %v / %v", i0, i1)
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	traces, scores := map[string]map[string]any{}, map[string]float64{}
	for _, ev := range lf.ingested {
		body := ev["body"].(map[string]any)
		switch ev["type"] {
		case "trace-create":
			traces[body["id"].(string)] = body
		case "score-create":
			scores[body["traceId"].(string)+"/"+body["name"].(string)] = body["value"].(float64)
		}
	}
	if len(traces) != 2 || len(lf.runItems) != 2 {
		t.Fatalf("written back: %d traces, %d run items: %v", len(traces), len(lf.runItems), lf.runItems)
	}
	byItem := map[string]string{}
	for _, ri := range lf.runItems {
		if ri["runName"] != "lf-experiment-1" {
			t.Errorf("run item: %v", ri)
		}
		byItem[ri["datasetItemId"].(string)] = ri["traceId"].(string)
	}
	tr := traces[byItem["lf-item-1"]]
	if tr == nil || tr["output"] != "Paris" || scores[byItem["lf-item-1"]+"/passed"] != 1 || scores[byItem["lf-item-2"]+"/passed"] != 0 {
		t.Errorf("trace of lf-item-1: %v; scores %v", tr, scores)
	}
	if meta := tr["metadata"].(map[string]any); meta["source"] != "agent_evaluation" || meta["evaluation_dataset_item_id"] != "lf-item-1" {
		t.Errorf("trace metadata: %v", meta)
	}
	// The agent runs carry the evaluation context of the dataset item.
	ar := c.OK("GET", "/api/agent/runs/"+i0["agent_run_id"].(string), nil)["run"].(map[string]any)
	if ar["source"] != "agent_evaluation" {
		t.Errorf("agent run source: %v", ar["source"])
	}
	// An unknown dataset is a 422 with a code when a run starts.
	c.Data("PUT", "/api/evaluation/suites/"+suiteID, map[string]any{"langfuse_dataset": "missing"})
	lf.mu.Unlock()
	r := c.Do("POST", "/api/evaluation/suites/"+suiteID+"/runs", map[string]any{})
	lf.mu.Lock()
	if r.Status != 422 || r.Code() != "langfuse_not_found" {
		t.Errorf("missing dataset: %d %s", r.Status, r.Body)
	}
}
