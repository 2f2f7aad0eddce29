package run_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Many calls of one step finishing at once, each delivered twice: the step's
// counter reaches zero once, and exactly one completion readies the next step.
func TestFanInUnderConcurrencyReadiesTheNextStepOnce(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	var calls []run.NewToolCall
	for i := range 8 {
		calls = append(calls, run.NewToolCall{ID: fmt.Sprintf("c%d", i), Name: "x", Arguments: `{}`})
	}
	if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), ToolCalls: calls}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var readied, recorded atomic.Int32
	for _, tc := range calls {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fan, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: id, ToolCallID: tc.ID, StepNo: 1, ThreadID: c.Run.ThreadID, Status: run.ToolSuccess, Output: "ok"})
				if err != nil {
					t.Error(err)
				}
				if !fan.Duplicate {
					recorded.Add(1)
				}
				if fan.NextStep == 2 {
					readied.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if recorded.Load() != 8 || readied.Load() != 1 {
		t.Fatalf("recorded %d results (want 8), readied the next step %d times (want 1)", recorded.Load(), readied.Load())
	}
	if n := f.Count(`SELECT pending_tools FROM agent_run_steps WHERE run_id = $1 AND step_no = 1`, id); n != 0 {
		t.Errorf("pending_tools = %d", n)
	}
	if n := f.Count(`SELECT count(*) FROM outbox WHERE dedupe_key = $1`, "step:"+id+":2"); n != 1 {
		t.Errorf("step.ready rows: %d", n)
	}
}

// A call waiting for the user among calls finishing at once: whichever
// completion is last ends the run as interrupted, and no next step is readied.
func TestFanInWithAnInterruptedCallEndsTheRunInterrupted(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		f, id := started(t)
		ctx := context.Background()
		c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
		calls := []run.NewToolCall{{ID: "ask", Name: "ask_user_question", Arguments: `{}`}}
		for i := range 4 {
			calls = append(calls, run.NewToolCall{ID: fmt.Sprintf("c%d", i), Name: "x", Arguments: `{}`})
		}
		if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), ToolCalls: calls}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var interrupted, readied atomic.Int32
		for _, tc := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := run.ToolResult{RunID: id, ToolCallID: tc.ID, StepNo: 1, ThreadID: c.Run.ThreadID, Status: run.ToolSuccess, Output: "ok"}
				if tc.ID == "ask" {
					res.Status, res.Output = run.ToolInterrupted, `{"interrupt":"ask_user_question_required","questions":[{"question":"Where to?"}]}`
				}
				fan, err := f.Runs.CompleteToolCall(ctx, res)
				if err != nil {
					t.Error(err)
				}
				if fan.Interrupted {
					interrupted.Add(1)
				}
				if fan.NextStep != 0 {
					readied.Add(1)
				}
			}()
		}
		wg.Wait()
		if interrupted.Load() != 1 || readied.Load() != 0 {
			t.Fatalf("round %d: interrupted %d times (want 1), readied %d times (want 0)", round, interrupted.Load(), readied.Load())
		}
		r, _ := f.Runs.Get(ctx, id)
		if r.Status != run.StatusInterrupted || r.ErrorMessage == nil || *r.ErrorMessage != "Where to?" {
			t.Fatalf("round %d: run %s %v", round, r.Status, r.ErrorMessage)
		}
	}
}
