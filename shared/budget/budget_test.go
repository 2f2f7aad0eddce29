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

// Many callers of one budget at once, each retrying while Busy: the budget
// is used up, nobody is refused while tokens are left, and the overspend is
// at most one call.
func TestConcurrentCallsOverspendByAtMostOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	const limit, perCall, callers = 1000, 300, 12
	svc := budget.New(pool, time.Minute).WithLimits(budget.Limits{MaxOutput: perCall - 10}) // each call costs its reservation
	lim := int64(limit)
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u", LimitTokens: &lim}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := budget.Call{RunID: fmt.Sprintf("run-%d", i), StepNo: 1, Attempt: 1, UID: "u", Agent: "a"}
			for {
				dec, ref, err := svc.Reserve(ctx, c, 10)
				if err != nil {
					t.Error(err)
					return
				}
				switch dec {
				case budget.Busy:
					time.Sleep(2 * time.Millisecond)
					continue
				case budget.Exhausted:
					if ref == nil || ref.Used < limit {
						t.Errorf("refused with tokens left: %+v", ref)
					}
					mu.Lock()
					refused++
					mu.Unlock()
					return
				}
				time.Sleep(time.Millisecond) // the model call
				if err := svc.Settle(ctx, c, perCall); err != nil {
					t.Error(err)
				}
				mu.Lock()
				admitted++
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	b, err := svc.Get(ctx, budget.ScopeUser, "u")
	if err != nil || b == nil {
		t.Fatal(b, err)
	}
	if b.UsedTokens != int64(admitted*perCall) || b.UsedTokens < limit || b.UsedTokens > limit+perCall || admitted+refused != callers {
		t.Errorf("used %d after %d admitted, %d refused calls (limit %d, %d per call)", b.UsedTokens, admitted, refused, limit, perCall)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM token_budget_reservations`).Scan(&left); err != nil || left != 0 {
		t.Errorf("reservations left: %d %v", left, err)
	}
	// No budget for another user or agent: unlimited, nothing written.
	if dec, _, err := svc.Reserve(ctx, budget.Call{RunID: "other", StepNo: 1, Attempt: 1, UID: "v", Agent: "b"}, 10); err != nil || dec != budget.Unlimited {
		t.Errorf("no budget: %v %v", dec, err)
	}
	// Reset and removal.
	if b, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u", LimitTokens: &lim, Reset: true}); err != nil || b.UsedTokens != 0 || b.RemainingTokens != limit {
		t.Errorf("reset: %+v %v", b, err)
	}
	if _, err := svc.Set(ctx, "root", budget.Update{Scope: budget.ScopeUser, Subject: "u"}); err != nil {
		t.Fatal(err)
	}
	if b, err := svc.Get(ctx, budget.ScopeUser, "u"); err != nil || b != nil {
		t.Errorf("removed: %+v %v", b, err)
	}
}
