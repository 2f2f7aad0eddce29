package e2e

// Token usage (schema v2 with cache-read tokens; per run in /result, per
// thread in the state) and token budgets checked before each model call:
// concurrent runs of one user overspend the user's budget by at most one
// call; an exhausted agent budget fails the run before any model call; the
// remaining budget is in /api/auth/me.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func usageReply(text string, in, out, cached int64) llmtest.Reply {
	r := llmtest.Text(text)
	r.Usage = &llmtest.Usage{PromptTokens: in, CompletionTokens: out}
	if cached >= 0 {
		r.Usage.PromptTokensDetails = &llmtest.PromptTokensDetails{CachedTokens: cached}
	}
	return r
}

func TestTokenUsageSchemaV2InResultAndThreadState(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	alice := p.Admin.NewUser("alice")
	p.LLM.Enqueue(usageReply("first", 200, 50, 150), usageReply("second", 100, 20, -1))
	th := alice.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "usage"})["id"].(string)
	var runs []string
	for _, q := range []string{"one", "two"} {
		id := alice.Submit(th, q, map[string]any{"agent_slug": "default-chatbot"})["run_id"].(string)
		if r := testkit.Render(alice.Collect(id, 20*time.Second)); r.EndStatus != "completed" {
			t.Fatalf("run %s: %+v", q, r)
		}
		runs = append(runs, id)
	}
	res := alice.OK("GET", "/api/agent/runs/"+runs[0]+"/result", nil)
	u := res["token_usage"].(map[string]any)
	m := u["models"].(map[string]any)["fake:test-model"].(map[string]any)
	if u["schema_version"] != float64(2) || m["input_tokens"] != float64(200) || m["output_tokens"] != float64(50) ||
		m["input_token_details"].(map[string]any)["cache_read"] != float64(150) || m["cache_hit_rate"] != 0.75 {
		t.Errorf("first run's usage: %v", u)
	}
	st := alice.OK("GET", "/api/chat/thread/"+th+"/state", nil)["agent_state"].(map[string]any)["token_usage"].(map[string]any)
	thread := st["thread"].(map[string]any)
	tm := thread["models"].(map[string]any)["fake:test-model"].(map[string]any)
	// The thread: both runs; the hit rate counts only the call that reported a cache figure.
	if thread["model_call_count"] != float64(2) || thread["total"].(map[string]any)["total_tokens"] != float64(370) ||
		tm["call_count"] != float64(2) || tm["input_token_details"].(map[string]any)["cache_read"] != float64(150) || tm["cache_hit_rate"] != 0.75 {
		t.Errorf("thread usage: %v", thread)
	}
	if run := st["run"].(map[string]any); run["total"].(map[string]any)["total_tokens"] != float64(120) {
		t.Errorf("latest run's usage: %v", run)
	}
	if latest := st["latest"].(map[string]any); latest["model_call_count"] != float64(1) || latest["total"].(map[string]any)["input_tokens"] != float64(100) {
		t.Errorf("latest call's usage: %v", latest)
	}
}

func TestTokenBudgetsCheckedBeforeEachModelCall(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	admin := p.Admin
	spender := admin.NewUser("spender")
	const limit, perCall = 1000, 300
	p.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply { return usageReply("ok", 200, 100, -1) })

	// Refused inputs, then the budget; /api/auth/me shows it.
	for _, body := range []map[string]any{{"scope": "team", "subject": "spender", "limit_tokens": 1}, {"scope": "user", "subject": "", "limit_tokens": 1},
		{"scope": "user", "subject": "spender", "limit_tokens": -1}} {
		if r := admin.Do("PUT", "/api/system/token-budgets", body); r.Status != 422 || r.Code() == "" {
			t.Errorf("budget %v: %d %s", body, r.Status, r.Body)
		}
	}
	admin.OK("PUT", "/api/system/token-budgets", map[string]any{"scope": "user", "subject": "spender", "limit_tokens": limit})
	if b := spender.OK("GET", "/api/auth/me", nil)["token_budget"].(map[string]any); b["remaining_tokens"] != float64(limit) {
		t.Fatalf("me before: %v", b)
	}
	if b := admin.OK("GET", "/api/auth/me", nil)["token_budget"]; b != nil {
		t.Errorf("admin has no budget: %v", b)
	}

	// Six concurrent runs of one call each.
	const n = 6
	var wg sync.WaitGroup
	status := make([]string, n)
	errType := make([]string, n)
	ids := make([]string, n)
	for i := range n {
		th := spender.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": fmt.Sprint("t", i)})["id"].(string)
		ids[i] = spender.Submit(th, fmt.Sprint("question ", i), map[string]any{"agent_slug": "default-chatbot"})["run_id"].(string)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			testkit.Render(spender.Collect(ids[i], 60*time.Second))
		}()
	}
	wg.Wait()
	completed := 0
	for i := range n {
		res := spender.OK("GET", "/api/agent/runs/"+ids[i]+"/result", nil)
		status[i] = fmt.Sprint(res["status"])
		if e, ok := res["error"].(map[string]any); ok {
			errType[i] = fmt.Sprint(e["type"])
		}
		switch {
		case status[i] == "completed":
			completed++
		case status[i] != "failed" || errType[i] != "budget_exhausted":
			t.Errorf("run %d: %s %s", i, status[i], errType[i])
		}
	}
	var used int64
	if err := p.P.App.Pool.QueryRow(context.Background(), `SELECT used_tokens FROM token_budgets WHERE scope = 'user' AND subject = 'spender'`).Scan(&used); err != nil {
		t.Fatal(err)
	}
	t.Logf("limit %d, %d tokens per call: %d of %d runs completed, %d tokens used", limit, perCall, completed, n, used)
	// Every completed call was charged; nobody was refused while tokens were
	// left; the overspend is at most one call.
	if used != int64(completed*perCall) || used < limit || used > limit+perCall || completed == n {
		t.Errorf("used %d after %d completed calls (limit %d, %d per call)", used, completed, limit, perCall)
	}
	if b := spender.OK("GET", "/api/auth/me", nil)["token_budget"].(map[string]any); b["remaining_tokens"] != float64(0) || b["used_tokens"] != float64(used) {
		t.Errorf("me after: %v", b)
	}
	var reserved int
	_ = p.P.App.Pool.QueryRow(context.Background(), `SELECT count(*) FROM token_budget_reservations`).Scan(&reserved)
	if reserved != 0 {
		t.Errorf("%d reservations left after every run ended", reserved)
	}

	// An agent budget of 0: the run fails before any model call; raising it lets runs through.
	calls := len(p.LLM.Requests())
	admin.OK("PUT", "/api/system/token-budgets", map[string]any{"scope": "agent", "subject": "default-chatbot", "limit_tokens": 0})
	th := admin.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "default-chatbot", "title": "agent budget"})["id"].(string)
	id := admin.Submit(th, "over budget", map[string]any{"agent_slug": "default-chatbot"})["run_id"].(string)
	if r := testkit.Render(admin.Collect(id, 20*time.Second)); r.EndStatus != "failed" {
		t.Fatalf("agent over budget: %+v", r)
	}
	res := admin.OK("GET", "/api/agent/runs/"+id+"/result", nil)
	if e, _ := res["error"].(map[string]any); e == nil || e["type"] != "budget_exhausted" {
		t.Errorf("agent budget result: %v", res)
	}
	if len(p.LLM.Requests()) != calls {
		t.Errorf("a model call was made past an exhausted budget")
	}
	list := admin.OK("GET", "/api/system/token-budgets", nil)["budgets"].([]any)
	if len(list) != 2 {
		t.Errorf("budgets: %v", list)
	}
	admin.OK("PUT", "/api/system/token-budgets", map[string]any{"scope": "agent", "subject": "default-chatbot", "limit_tokens": nil})
	id = admin.Submit(th, "budget lifted", map[string]any{"agent_slug": "default-chatbot"})["run_id"].(string)
	if r := testkit.Render(admin.Collect(id, 20*time.Second)); r.EndStatus != "completed" {
		t.Errorf("after the budget was removed: %+v", r)
	}
	if r := spender.Do("PUT", "/api/system/token-budgets", map[string]any{"scope": "user", "subject": "spender", "limit_tokens": 1 << 40}); r.Status != http.StatusForbidden {
		t.Errorf("a user raises their own budget: %d %s", r.Status, r.Body)
	}
}
