package budget_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// A daily budget renews with the UTC day: once its window has passed its
// use reads as 0 (in Get, which /api/auth/me shows, and in admission) and
// the next charge starts the new window; a lifetime budget never renews;
// changing the period starts a new window.
func TestPeriodicBudgetsRenewWithTheirWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	svc := budget.New(pool, time.Minute)
	lim, daily, monthly := int64(100), budget.PeriodDaily, budget.PeriodMonthly
	b, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u", LimitTokens: &lim, Period: &daily})
	if err != nil || b.Period != "daily" || b.ResetsAt == nil || !b.ResetsAt.Equal(b.WindowStart.Add(24*time.Hour)) ||
		b.WindowStart.UTC().Hour() != 0 || b.WindowStart.After(time.Now()) {
		t.Fatalf("daily budget: %+v %v", b, err)
	}
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeAgent, Subject: "a", LimitTokens: &lim}); err != nil {
		t.Fatal(err)
	}
	c := budget.Call{RunID: "r1", StepNo: 1, Attempt: 1, CallNo: budget.CallTurn, UID: "u", Agent: "a"}
	charge := func(c budget.Call, n int64) budget.Decision {
		t.Helper()
		dec, _, err := svc.Reserve(ctx, c, 10)
		if err != nil {
			t.Fatal(err)
		}
		if dec == budget.Admitted {
			if err := svc.Settle(ctx, c, n); err != nil {
				t.Fatal(err)
			}
		}
		return dec
	}
	if dec := charge(c, 100); dec != budget.Admitted {
		t.Fatalf("first call: %v", dec)
	}
	c.StepNo = 2
	if dec := charge(c, 1); dec != budget.Exhausted {
		t.Fatalf("spent budget: %v", dec)
	}
	// Yesterday's window: the daily budget reads as unused, the lifetime
	// agent budget (set without a period) does not renew.
	if _, err := pool.Exec(ctx, `UPDATE token_budgets SET period_start = period_start - interval '1 day'`); err != nil {
		t.Fatal(err)
	}
	if b, _ := svc.Get(ctx, budget.ScopeUser, "u"); b.UsedTokens != 0 || b.RemainingTokens != 100 {
		t.Errorf("daily budget in a new day: %+v", b)
	}
	if b, _ := svc.Get(ctx, budget.ScopeAgent, "a"); b.Period != "lifetime" || b.UsedTokens != 100 || b.ResetsAt != nil {
		t.Errorf("lifetime budget: %+v", b)
	}
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeAgent, Subject: "a", LimitTokens: &lim, Period: &monthly}); err != nil {
		t.Fatal(err)
	}
	if b, _ := svc.Get(ctx, budget.ScopeAgent, "a"); b.UsedTokens != 0 || b.WindowStart.UTC().Day() != 1 {
		t.Errorf("a new period starts a new window: %+v", b)
	}
	c.StepNo = 3
	if dec := charge(c, 30); dec != budget.Admitted {
		t.Fatalf("call in the new day: %v", dec)
	}
	if b, _ := svc.Get(ctx, budget.ScopeUser, "u"); b.UsedTokens != 30 || b.WindowStart.Before(time.Now().Add(-24*time.Hour)) {
		t.Errorf("the charge starts the new window: %+v", b)
	}
	bad := "weekly"
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u", LimitTokens: &lim, Period: &bad}); err == nil {
		t.Error("an unknown period was accepted")
	}
}

// The model calls of one step attempt — the context summary and each try
// of the turn — hold reservations of their own: a retry does not replace
// the summary's, and each settles its own.
func TestEachModelCallOfAStepIsAdmittedAndSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	svc := budget.New(pool, time.Minute).WithLimits(budget.Limits{MaxOutput: 190}) // a call reserves 10 + 190
	lim := int64(1000)
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u", LimitTokens: &lim}); err != nil {
		t.Fatal(err)
	}
	base := budget.Call{RunID: "r", StepNo: 1, Attempt: 1, UID: "u", Agent: "a"}
	calls := []budget.Call{base, base, base}
	calls[0].CallNo, calls[1].CallNo, calls[2].CallNo = budget.CallSummary, budget.CallTurn, budget.CallTurn+1
	// The summary, settled; then the two tries, one beside the other.
	for i, c := range calls {
		if dec, _, err := svc.Reserve(ctx, c, 10); err != nil || dec != budget.Admitted {
			t.Fatalf("call %d: %v %v", i, dec, err)
		}
		if i == 0 {
			if err := svc.Settle(ctx, c, 200); err != nil {
				t.Fatal(err)
			}
		}
	}
	var held int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM token_budget_reservations`).Scan(&held); err != nil || held != 2 {
		t.Fatalf("reservations of the two tries: %d %v", held, err)
	}
	for _, c := range calls[1:] {
		if err := svc.Settle(ctx, c, 100); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := svc.Get(ctx, budget.ScopeUser, "u"); b.UsedTokens != 400 {
		t.Errorf("summary 200 + two tries of 100: used %d", b.UsedTokens)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM token_budget_reservations`).Scan(&held); err != nil || held != 0 {
		t.Errorf("reservations left: %d %v", held, err)
	}
}
