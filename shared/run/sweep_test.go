package run_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
)

func TestSweepRedrivesAStepWhoseLeaseExpired(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	if c, _ := f.Runs.Claim(ctx, id, 1, "dead-worker", time.Minute); c.Outcome != run.Claimed {
		t.Fatal(c.Outcome)
	}
	// A live lease is left alone.
	if recs, err := f.Runs.RecoverStuck(ctx, run.SweepConfig{Stale: time.Hour}); err != nil || len(recs) != 0 {
		t.Fatalf("sweep touched a live lease: %+v %v", recs, err)
	}
	// The worker dies; its lease runs out (set in the past rather than slept
	// through, so a busy machine cannot expire it before the check above).
	expireLease(t, f, id)
	recs, err := f.Runs.RecoverStuck(ctx, run.SweepConfig{Stale: time.Hour})
	if err != nil || len(recs) != 1 || recs[0].Action != "redrive_step" {
		t.Fatalf("recover: %+v %v", recs, err)
	}
	evs := f.WaitEvents(events.TypeStepReady, 2)
	if got := runtest.Decode[events.StepReady](t, evs[1]); got.RunID != id || got.StepNo != 1 {
		t.Errorf("redriven step: %+v", got)
	}
	c, err := f.Runs.Claim(ctx, id, 1, "new-worker", time.Minute)
	if err != nil || c.Outcome != run.Claimed || !c.Retry {
		t.Fatalf("the redriven step must be claimable as a retry: %+v %v", c, err)
	}
}

func TestSweepGivesUpAfterMaxRecoveries(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if c, _ := f.Runs.Claim(ctx, id, 1, "flaky", time.Minute); c.Outcome != run.Claimed {
			t.Fatalf("claim %d: %s", i, c.Outcome)
		}
		expireLease(t, f, id)
		recs, err := f.Runs.RecoverStuck(ctx, run.SweepConfig{Stale: time.Hour, MaxRecoveries: 2})
		if err != nil || len(recs) != 1 {
			t.Fatalf("round %d: %+v %v", i, recs, err)
		}
		want := run.RecoveryRedriveStep
		if i == 2 {
			want = run.RecoveryFailed
		}
		if recs[0].Action != want {
			t.Fatalf("round %d: action %s, want %s", i, recs[0].Action, want)
		}
	}
	r, _ := f.Runs.Get(ctx, id)
	if r.Status != run.StatusFailed || *r.ErrorType != "worker_lease_expired" {
		t.Fatalf("run: %+v", r)
	}
	f.WaitEvents(events.TypeRunFinished, 1)
}

func TestSweepEndsCancelRequestedRunsWhoseWorkerDied(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	if c, _ := f.Runs.Claim(ctx, id, 1, "dead", time.Minute); c.Outcome != run.Claimed {
		t.Fatal(c.Outcome)
	}
	if _, outcome, err := f.Runs.RequestCancel(ctx, "alice", id); err != nil || outcome != run.CancelRequested {
		t.Fatal(outcome, err)
	}
	// The worker died while the cancel was on its way.
	expireLease(t, f, id)
	recs, err := f.Runs.RecoverStuck(ctx, run.SweepConfig{Stale: time.Hour})
	if err != nil || len(recs) != 1 || recs[0].Action != "cancelled" || recs[0].Run.Status != run.StatusCancelled {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestSweepRedrivesPendingToolCallsOfAStaleRun(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(),
		ToolCalls: []run.NewToolCall{{ID: "t1", Name: "x", Arguments: "{}"}, {ID: "t2", Name: "x", Arguments: "{}"}}}); err != nil {
		t.Fatal(err)
	}
	f.WaitEvents(events.TypeToolCallRequested, 2)
	if _, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: id, ToolCallID: "t1", Status: "success"}); err != nil {
		t.Fatal(err)
	}
	// No progress for longer than Stale (the clock moved back rather than slept through).
	if _, err := f.Pool.Exec(ctx, `UPDATE agent_runs SET last_progress_at = clock_timestamp() - interval '2 hours' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	recs, err := f.Runs.RecoverStuck(ctx, run.SweepConfig{Stale: time.Hour})
	if err != nil || len(recs) != 1 || recs[0].Action != "redrive_tools" {
		t.Fatalf("%+v %v", recs, err)
	}
	evs := f.WaitEvents(events.TypeToolCallRequested, 3)
	if got := runtest.Decode[events.ToolCallRequested](t, evs[2]); got.ToolCallID != "t2" {
		t.Errorf("only the unfinished call is redriven: %+v", got)
	}
}

func TestCancelPendingRunEndsItAtOnce(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	r, outcome, err := f.Runs.RequestCancel(ctx, "alice", id)
	if err != nil || outcome != run.CancelImmediate || r.Status != run.StatusCancelled {
		t.Fatalf("%+v %v %v", r, outcome, err)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE id = $1 AND delivery_status = 'cancelled'`, *r.InputMessageID); n != 1 {
		t.Error("input message not cancelled")
	}
	if c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute); c.Outcome != run.Gone {
		t.Errorf("a cancelled run was claimed: %s", c.Outcome)
	}
	if _, outcome, _ := f.Runs.RequestCancel(ctx, "alice", id); outcome != run.CancelNoop {
		t.Errorf("second cancel: %v", outcome)
	}
	if _, _, err := f.Runs.RequestCancel(ctx, "bob", id); err == nil {
		t.Error("another user cancelled the run")
	}
}

// expireLease ends the lease of run id's worker now, in the database's clock
// (rather than sleeping through a short lease, which a busy machine can
// stretch either way).
func expireLease(t *testing.T, f *runtest.Fixture, id string) {
	t.Helper()
	if _, err := f.Pool.Exec(context.Background(), `UPDATE agent_runs SET lease_expires_at = clock_timestamp() - interval '1 second'
		WHERE id = $1 AND lease_expires_at IS NOT NULL`, id); err != nil {
		t.Fatal(err)
	}
}
