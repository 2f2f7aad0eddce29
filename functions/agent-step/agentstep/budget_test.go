package agentstep_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// budgetEnv is env with token budgets and context summaries on.
func budgetEnv(t *testing.T) (env, *budget.Service) {
	t.Helper()
	e := newEnv(t)
	svc := budget.New(e.Pool, time.Minute).WithLimits(budget.Limits{MaxOutput: 100})
	models, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_FAKE_BASE_URL=" + e.model.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.h = agentstep.New(e.Runs, models, e.Tools, e.Stream, agentstep.Config{WorkerID: "step-under-test",
		FlushEvery: 5 * time.Millisecond, RetryBackoff: time.Millisecond, Budgets: svc, Summaries: compaction.NewStore(e.Pool)}, nil)
	return e, svc
}

func setBudget(t *testing.T, svc *budget.Service, uid string, limit int64) {
	t.Helper()
	if _, err := svc.Set(context.Background(), "root", budget.Update{Scope: budget.ScopeUser, Subject: uid, LimitTokens: &limit}); err != nil {
		t.Fatal(err)
	}
}

// A model call retried inside a step is admitted again: when the budget
// ran out while the first try failed (another run spent it), the retry is
// refused and the run fails budget_exhausted without calling the model.
func TestARetriedModelCallIsAdmittedAgain(t *testing.T) {
	t.Parallel()
	e, svc := budgetEnv(t)
	in := e.submit("hello")
	setBudget(t, svc, "alice", 1000)
	var calls atomic.Int32
	e.model.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if calls.Add(1) == 1 {
			// Meanwhile another run of alice's spends what is left.
			other := budget.Call{RunID: "other", StepNo: 1, Attempt: 1, CallNo: budget.CallTurn, UID: "alice", Agent: "x"}
			if dec, _, err := svc.Reserve(context.Background(), other, 10); err != nil || dec != budget.Admitted {
				t.Errorf("the other run's call: %v %v", dec, err)
			}
			if err := svc.Settle(context.Background(), other, 1000); err != nil {
				t.Error(err)
			}
			return llmtest.Fail(503, "overloaded")
		}
		return llmtest.Text("should not be asked")
	})
	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("model calls = %d, want 1 (the retry must be refused)", n)
	}
	if r := e.run(in.RunID); r.Status != run.StatusFailed || r.ErrorType == nil || *r.ErrorType != budget.ErrorType {
		t.Errorf("run: status %s, error type %v", r.Status, r.ErrorType)
	}
	if n := e.Count(`SELECT count(*) FROM token_budget_reservations`); n != 0 {
		t.Errorf("reservations left: %d", n)
	}
}

// The context summary is a model call like the turn: admitted, charged to
// the budget and counted in the run's token usage.
func TestTheContextSummaryCallIsBudgetedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, svc := budgetEnv(t)
	alice := e.User("alice")
	th := e.Thread("alice")
	long := strings.Repeat("the capybara report says many things. ", 150) // ≈ 1,500 tokens
	first := e.MustSubmit(alice, th, long, "")
	e.model.Enqueue(llmtest.Text("noted"))
	if err := e.h.Handle(ctxT(t), stepOne(first.RunID, th)); err != nil {
		t.Fatal(err)
	}
	second := e.MustSubmit(alice, th, "and now?", "")
	if second.RunID == nil {
		runID, err := e.Queue.DispatchNext(ctx, "alice", "default-chatbot", th)
		if err != nil || runID == "" {
			t.Fatalf("dispatch: %q %v", runID, err)
		}
		second.RunID = &runID
	}
	// Summaries on at 1,000 tokens keeping one message.
	if _, err := e.Pool.Exec(ctx, `UPDATE agent_runs SET input_payload = jsonb_set(input_payload, '{context,summary}',
		input_payload->'context'->'summary' || '{"threshold_k": 1, "keep_messages": 1, "l2_trigger_ratio": 0.4}') WHERE id = $1`, *second.RunID); err != nil {
		t.Fatal(err)
	}
	setBudget(t, svc, "alice", 100000)
	usage := func(in, out int64) *llmtest.Usage { return &llmtest.Usage{PromptTokens: in, CompletionTokens: out} }
	var summaryAsked, turnAsked atomic.Int32
	e.model.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		if strings.Contains(req.LastUserMessage(), "Conversation to summarise") {
			summaryAsked.Add(1)
			r := llmtest.Text("a summary of the capybara report")
			r.Usage = usage(700, 50)
			return r
		}
		turnAsked.Add(1)
		r := llmtest.Text("the answer")
		r.Usage = usage(200, 30)
		return r
	})
	if err := e.h.Handle(ctxT(t), stepOne(second.RunID, th)); err != nil {
		t.Fatal(err)
	}
	if summaryAsked.Load() != 1 || turnAsked.Load() != 1 {
		t.Fatalf("summary calls %d, turn calls %d; want 1 and 1", summaryAsked.Load(), turnAsked.Load())
	}
	r := e.run(*second.RunID)
	if r.Status != run.StatusCompleted {
		t.Fatalf("run: %+v", r)
	}
	var u run.TokenUsage
	if err := json.Unmarshal(r.TokenUsage, &u); err != nil {
		t.Fatal(err)
	}
	if u.ModelCallCount != 2 || u.Total.TotalTokens != 750+230 {
		t.Errorf("run usage counts the summary: %d calls, %d tokens (want 2, 980): %s", u.ModelCallCount, u.Total.TotalTokens, r.TokenUsage)
	}
	b, err := svc.Get(ctx, budget.ScopeUser, "alice")
	if err != nil || b.UsedTokens != 750+230 {
		t.Errorf("budget charged %v (want 980, the summary's 750 and the turn's 230): %v", b, err)
	}
}

// stepOne is the step.ready event of a run's first step.
func stepOne(runID *string, th string) events.StepReady {
	return events.StepReady{RunID: *runID, ThreadID: th, StepNo: 1}
}
