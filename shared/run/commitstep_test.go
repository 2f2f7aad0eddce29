package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/run"
)

// A provider that repeats its tool call ids across turns: the ids the caller
// did not pass as used are found and renamed, and the step still commits.
func TestCommitStepRenamesToolCallIDsTheRunAlreadyHas(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	calls := []run.NewToolCall{{ID: "call_0", Name: "x", Arguments: `{}`}}
	if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), ToolCalls: calls}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: id, ToolCallID: "call_0", Status: run.ToolSuccess, Output: "ok"}); err != nil {
		t.Fatal(err)
	}
	c2, err := f.Runs.Claim(ctx, id, 2, "w", time.Minute)
	if err != nil || c2.Outcome != run.Claimed {
		t.Fatalf("claim step 2: %+v %v", c2, err)
	}
	res, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c2.Run, StepNo: 2, Owner: run.Owner{Worker: "w", Attempt: c2.Attempt}, StartedAt: time.Now(),
		ToolCalls: []run.NewToolCall{{ID: "call_0", Name: "x", Arguments: `{}`}, {ID: "call_0", Name: "x", Arguments: `{}`}}})
	if err != nil || res.Outcome != run.OutcomeTools {
		t.Fatalf("%+v %v", res, err)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].ID == "call_0" || res.ToolCalls[1].ID == "call_0" || res.ToolCalls[0].ID == res.ToolCalls[1].ID {
		t.Fatalf("ids not renamed: %+v", res.ToolCalls)
	}
	if n := f.Count(`SELECT count(*) FROM tool_calls WHERE run_id = $1`, id); n != 3 {
		t.Errorf("tool calls: %d", n)
	}
}

// A cancel requested while the model streamed: the step's commit ends the
// run cancelled at this boundary and its tool calls are recorded cancelled.
func TestCommitStepAfterACancelRequestEndsTheRunCancelled(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	if _, outcome, err := f.Runs.RequestCancel(ctx, "alice", id); err != nil || outcome != run.CancelRequested {
		t.Fatalf("cancel: %v %v", outcome, err)
	}
	res, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(),
		Content: "partial", Partial: true, ToolCalls: []run.NewToolCall{{ID: "a", Name: "x", Arguments: `{}`}}})
	if err != nil || res.Outcome != run.OutcomeCancelled || res.Run.Status != run.StatusCancelled {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Run.OutputMessageID == nil || *res.Run.OutputMessageID != res.MessageID {
		t.Errorf("output message %v, committed message %d", res.Run.OutputMessageID, res.MessageID)
	}
	if n := f.Count(`SELECT count(*) FROM tool_calls WHERE run_id = $1 AND status = 'cancelled'`, id); n != 1 {
		t.Errorf("cancelled tool calls: %d", n)
	}
}
