package agentstep

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Budgets admits and charges model calls against per-user and per-agent
// token budgets (*budget.Service).
type Budgets interface {
	Reserve(ctx context.Context, c budget.Call, estimate int64) (budget.Decision, *budget.Refusal, error)
	Settle(ctx context.Context, c budget.Call, used int64) error
	MaxOutput() int64
}

// budgetWait bounds how long a step waits for other calls in flight to
// settle before it gives the step back (redelivered later).
const budgetWait = 5 * time.Minute

// admit checks the budgets before the step's model call, estimate being
// its input's size (requestEstimate): a nil refusal when the call may go
// ahead (settle: whether a budget applies, and then the call must be sent
// with max_tokens = Budgets.MaxOutput() and charged); a refusal when a
// budget has nothing left. While other calls in flight hold what is left it
// waits for them, renewing its lease.
func (s *step) admit(ctx context.Context, c budget.Call, estimate int64) (ref *budget.Refusal, settle bool, err error) {
	h := s.h
	wait, renewed, until := 20*time.Millisecond, time.Now(), time.Now().Add(budgetWait)
	for {
		dec, ref, err := h.cfg.Budgets.Reserve(ctx, c, estimate)
		switch {
		case err != nil:
			return nil, false, err
		case dec == budget.Unlimited:
			return nil, false, nil
		case dec == budget.Admitted:
			return nil, true, nil
		case dec == budget.Exhausted:
			return ref, false, nil
		}
		if time.Now().After(until) {
			return nil, false, fmt.Errorf("token budget busy for %s", budgetWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 500*time.Millisecond)
		if time.Since(renewed) > h.cfg.Lease/3 {
			if err := h.runs.Renew(ctx, s.r.ID, s.owner.Worker, s.owner.Attempt, h.cfg.Lease); err != nil {
				if errors.Is(err, run.ErrLeaseLost) {
					return nil, false, err
				}
				return nil, false, fmt.Errorf("renew lease while waiting for the token budget: %w", err)
			}
			renewed = time.Now()
		}
	}
}

// budgetCall is the step attempt's model call n (budget.CallSummary,
// budget.CallTurn + try).
func (s *step) budgetCall(n int) budget.Call {
	return budget.Call{RunID: s.r.ID, StepNo: s.in.StepNo, Attempt: s.owner.Attempt, CallNo: n, UID: s.r.UID, Agent: s.r.AgentSlug}
}

// settle charges an admitted call, trying a few times: Settle is
// idempotent, and a call never settled is charged its reservation once the
// reservation's lease ends (budget.Service.Sweep or the next admission), so
// a failure here is logged, not returned.
func (s *step) settle(ctx context.Context, c budget.Call, used int64) {
	ctx = context.WithoutCancel(ctx)
	s.h.crash("step.budget.settle") // the model was called; the charge is not yet made
	var err error
	for try, wait := 0, 50*time.Millisecond; try < 3; try, wait = try+1, wait*4 {
		if try > 0 {
			time.Sleep(wait) // a database blip: nothing to wait on but time
		}
		if err = s.h.cfg.Budgets.Settle(ctx, c, used); err == nil {
			return
		}
	}
	s.h.log.Warn("settle token budget; the reservation will be charged when its lease ends", "run", s.r.ID, "step", s.in.StepNo, "error", err)
}

// requestEstimate is the approximate input size of req: its messages and
// the specs of its tools.
func requestEstimate(req llm.Request) int64 {
	n := compaction.Estimate(req.Messages)
	for _, t := range req.Tools {
		n += 8 + compaction.EstimateText(t.Name) + compaction.EstimateText(t.Description) + compaction.EstimateText(string(t.Parameters))
	}
	return int64(n)
}

// usageOf is a model call's usage as run records it.
func usageOf(u llm.Usage) run.Usage {
	return run.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens, Reported: u.Reported,
		CacheReadTokens: u.CacheReadTokens, CacheReported: u.CacheReported}
}

// charged is what a model call costs a budget: the provider's total when it
// reported usage, otherwise the estimate of the request (estimate) and of
// the answer, the latter at most maxOut (the cap it was sent with; 0: none).
func charged(estimate int64, maxOut int64, resp llm.Response) int64 {
	u := resp.Usage
	switch {
	case u.Reported && u.TotalTokens > 0:
		return u.TotalTokens
	case u.Reported:
		return u.InputTokens + u.OutputTokens
	case resp.Content == "" && len(resp.ToolCalls) == 0:
		return 0 // no answer: nothing to charge
	}
	out := int64(compaction.EstimateText(resp.Content))
	for _, tc := range resp.ToolCalls {
		out += int64(compaction.EstimateText(tc.Name + tc.Arguments))
	}
	if maxOut > 0 {
		out = min(out, maxOut)
	}
	return estimate + out
}
