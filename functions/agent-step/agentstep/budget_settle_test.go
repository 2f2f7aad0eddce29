package agentstep_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

type crashed struct{ point string }

// A step that dies after its model call and before the charge: the call
// was sent with max_tokens = the output cap (so it cannot cost more than
// it reserved), its reservation stays, and once the reservation's lease
// ends the budget sweep charges it at its reserved amount.
func TestACrashBeforeTheSettleStillCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	svc := budget.New(e.Pool, time.Minute).WithLimits(budget.Limits{MaxOutput: 64})
	models, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_FAKE_BASE_URL=" + e.model.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.h = agentstep.New(e.Runs, models, e.Tools, e.Stream, agentstep.Config{WorkerID: "step-under-test",
		FlushEvery: 5 * time.Millisecond, RetryBackoff: time.Millisecond, Budgets: svc, Summaries: compaction.NewStore(e.Pool),
		Crash: func(point string) {
			if point == "step.budget.settle" {
				panic(crashed{point})
			}
		}}, nil)
	in := e.submit("hello")
	setBudget(t, svc, "alice", 100000)
	var maxTokens atomic.Value
	e.model.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		maxTokens.Store(string(req.Extra["max_tokens"]))
		r := llmtest.Text("hi")
		r.Usage = &llmtest.Usage{PromptTokens: 20, CompletionTokens: 5}
		return r
	})
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(crashed); !ok {
					panic(p)
				}
			}
		}()
		_ = e.h.Handle(ctxT(t), in)
		t.Fatal("the step did not reach its settle")
	}()
	if got := maxTokens.Load(); got != "64" {
		t.Errorf("max_tokens sent: %v, want 64", got)
	}
	var reserved int64
	if err := e.Pool.QueryRow(ctx, `SELECT tokens FROM token_budget_reservations WHERE run_id = $1 AND charged_at IS NULL`, in.RunID).Scan(&reserved); err != nil {
		t.Fatalf("the crashed call's reservation: %v", err)
	}
	if reserved <= 64 {
		t.Errorf("reserved %d: want the input estimate + 64", reserved)
	}
	if b, _ := svc.Get(ctx, budget.ScopeUser, "alice"); b.UsedTokens != 0 {
		t.Fatalf("charged before the lease ended: %d", b.UsedTokens)
	}
	// The lease ends (instead of waiting a minute, it is moved back).
	if _, err := e.Pool.Exec(ctx, `UPDATE token_budget_reservations SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	b, err := svc.Get(ctx, budget.ScopeUser, "alice")
	if err != nil || b.UsedTokens != reserved {
		t.Errorf("after the sweep: %+v %v; want %d used", b, err, reserved)
	}
	raw, _ := json.Marshal(b)
	t.Logf("budget after the sweep: %s", raw)
}
