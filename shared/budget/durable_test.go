package budget_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// Calls growing in size, each larger than every call before it (the case
// the old bound, "the largest call seen", missed), many at once: the
// budget's use never passes limit − 1 + the largest reservation, while
// every call costs its whole reservation (the worst case the bound allows).
func TestOverspendBoundHoldsForGrowingCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	const maxOut = 100
	svc := budget.New(pool, time.Minute).WithLimits(budget.Limits{MaxOutput: maxOut})
	lim := int64(5000)
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeAgent, Subject: "a", LimitTokens: &lim}); err != nil {
		t.Fatal(err)
	}
	const callers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var largest, spent int64
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			estimate := int64(100 * (i + 1)) // 100 … 1600 tokens of input
			c := budget.Call{RunID: fmt.Sprintf("run-%d", i), StepNo: 1, Attempt: 1, CallNo: budget.CallTurn, UID: "u", Agent: "a"}
			for {
				dec, _, err := svc.Reserve(ctx, c, estimate)
				if err != nil {
					t.Error(err)
					return
				}
				if dec == budget.Busy {
					time.Sleep(time.Millisecond) // another caller's settle, which we cannot wait on
					continue
				}
				if dec == budget.Exhausted {
					return
				}
				r := svc.Reservation(estimate)
				if r != estimate+maxOut {
					t.Errorf("reservation %d for an estimate of %d", r, estimate)
				}
				if err := svc.Settle(ctx, c, r); err != nil {
					t.Error(err)
				}
				mu.Lock()
				largest, spent = max(largest, r), spent+r
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	b, err := svc.Get(ctx, budget.ScopeAgent, "a")
	if err != nil {
		t.Fatal(err)
	}
	if b.UsedTokens != spent || b.UsedTokens < lim || b.UsedTokens > lim-1+largest {
		t.Errorf("used %d (charged %d): want within [%d, %d]", b.UsedTokens, spent, lim, lim-1+largest)
	}
	// A ceiling is the least a call reserves.
	svc.WithLimits(budget.Limits{MaxOutput: maxOut, Ceiling: 4000})
	if r := svc.Reservation(10); r != 4000 {
		t.Errorf("ceiling: reservation %d", r)
	}
}

// A crash between the model call and Settle: the reservation is charged at
// its reserved amount once its lease ends — by the next admission on the
// budget, or by Sweep — and a late Settle charges only the difference.
func TestUnsettledCallIsChargedItsReservation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	svc := budget.New(pool, time.Hour).WithLimits(budget.Limits{MaxOutput: 50})
	lim := int64(10000)
	for _, scope := range []string{budget.ScopeUser, budget.ScopeAgent} {
		if _, err := svc.Set(ctx, "root", budget.Update{Scope: scope, Subject: map[string]string{"user": "u", "agent": "a"}[scope], LimitTokens: &lim}); err != nil {
			t.Fatal(err)
		}
	}
	used := func(scope, subject string) int64 {
		t.Helper()
		b, err := svc.Get(ctx, scope, subject)
		if err != nil {
			t.Fatal(err)
		}
		return b.UsedTokens
	}
	expire := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE token_budget_reservations SET expires_at = now() - interval '1 second' WHERE charged_at IS NULL`); err != nil {
			t.Fatal(err)
		}
	}
	crashed := budget.Call{RunID: "crashed", StepNo: 1, Attempt: 1, CallNo: budget.CallTurn, UID: "u", Agent: "a"}
	if dec, _, err := svc.Reserve(ctx, crashed, 150); err != nil || dec != budget.Admitted {
		t.Fatal(dec, err)
	}
	// The step dies here. Its lease ends; the next admission charges it.
	expire()
	next := budget.Call{RunID: "next", StepNo: 1, Attempt: 1, CallNo: budget.CallTurn, UID: "u", Agent: "a"}
	if dec, _, err := svc.Reserve(ctx, next, 10); err != nil || dec != budget.Admitted {
		t.Fatal(dec, err)
	}
	if u, a := used("user", "u"), used("agent", "a"); u != 200 || a != 200 {
		t.Errorf("after the next admission: user %d, agent %d used; want 200 each", u, a)
	}
	// Charged once: another admission does not charge it again.
	if dec, _, err := svc.Reserve(ctx, next, 10); err != nil || dec != budget.Admitted {
		t.Fatal(dec, err)
	}
	if u := used("user", "u"); u != 200 {
		t.Errorf("charged twice: %d", u)
	}
	// A late Settle (the call was only slow) corrects to what it cost;
	// settling again changes nothing.
	for range 2 {
		if err := svc.Settle(ctx, crashed, 120); err != nil {
			t.Fatal(err)
		}
		if u, a := used("user", "u"), used("agent", "a"); u != 120 || a != 120 {
			t.Errorf("after the late settle: user %d, agent %d; want 120", u, a)
		}
	}
	// With no later admission, Sweep charges it.
	expire()
	if n, err := svc.Sweep(ctx); err != nil || n != 2 {
		t.Errorf("sweep touched %d budgets: %v", n, err)
	}
	if u, a := used("user", "u"), used("agent", "a"); u != 120+60 || a != 120+60 {
		t.Errorf("after the sweep: user %d, agent %d; want 180", u, a)
	}
	if n, err := svc.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("second sweep touched %d budgets: %v", n, err)
	}
	var inFlight int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM token_budget_reservations WHERE charged_at IS NULL`).Scan(&inFlight); err != nil || inFlight != 0 {
		t.Errorf("reservations still in flight: %d %v", inFlight, err)
	}
}
