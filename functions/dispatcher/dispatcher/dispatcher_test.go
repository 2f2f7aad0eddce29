package dispatcher_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

type env struct {
	*runtest.Fixture
	h *dispatcher.Handler
	// quiet is a run store over the same database that writes no stream: a
	// run ended through it looks like one whose best-effort closing events
	// were lost, so only run.finished (the dispatcher) can close its stream.
	quiet *run.Store
	alice access.Subject
}

func newEnv(t *testing.T, cfg dispatcher.Config) env {
	t.Helper()
	f := runtest.NewStreamed(t)
	return env{Fixture: f, h: dispatcher.New(f.Runs, f.Queue, f.Relay, cfg, nil),
		quiet: run.NewStore(f.Pool, f.Outbox, nil, nil), alice: f.User("alice")}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// finished is the run.finished event of a terminal run.
func (e env) finished(id string) events.RunFinished {
	e.T.Helper()
	r, err := e.Runs.Get(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	if !run.IsTerminal(r.Status) {
		e.T.Fatalf("run %s is %s, not terminal", id, r.Status)
	}
	return events.RunFinished{RunID: r.ID, ThreadID: r.ThreadID, UID: r.UID, AgentSlug: r.AgentSlug, Status: r.Status}
}

// completeQuietly ends a run as completed without writing its stream (the
// way agent-step commits; its best-effort stream write is left out).
func (e env) completeQuietly(id string) {
	e.T.Helper()
	ctx := context.Background()
	c, err := e.quiet.Claim(ctx, id, 1, "w", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		e.T.Fatalf("claim %s: %+v %v", id, c, err)
	}
	if _, err := e.quiet.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt},
		StartedAt: time.Now(), Content: "done", StreamMessageID: "m"}); err != nil {
		e.T.Fatalf("commit %s: %v", id, err)
	}
}

func (e env) request(id string) queue.Request {
	e.T.Helper()
	r, err := e.Queue.GetRequest(context.Background(), "alice", id)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// activeRuns counts the thread's runs not yet terminal.
func (e env) activeRuns(threadID string) int {
	e.T.Helper()
	return e.Count(`SELECT count(*) FROM agent_runs WHERE conversation_thread_id = $1 AND status IN ('pending', 'running', 'cancel_requested')`, threadID)
}

func (e env) runsOf(threadID string) int {
	e.T.Helper()
	return e.Count(`SELECT count(*) FROM agent_runs WHERE conversation_thread_id = $1`, threadID)
}

func (e env) endStatus(runID string) string {
	e.T.Helper()
	end, ok := e.Stream.Last(runID, runstream.EventEnd)
	if !ok {
		return ""
	}
	s, _ := end.Payload["status"].(string)
	return s
}

func TestRunFinishedClosesTheStreamAndDispatchesTheQueueInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dispatcher.Config{})
	ctx := ctxT(t)
	th := e.Thread("alice")
	first := e.MustSubmit(e.alice, th, "one", "")
	second := e.MustSubmit(e.alice, th, "two", "")
	third := e.MustSubmit(e.alice, th, "three", "")
	if first.RunID == nil || second.Status != queue.RequestQueued || third.Status != queue.RequestQueued {
		t.Fatalf("setup: %+v %+v %+v", first, second, third)
	}

	e.completeQuietly(*first.RunID)
	if n := e.Stream.Count(*first.RunID, runstream.EventEnd); n != 0 {
		t.Fatalf("setup: the stream was closed before run.finished")
	}
	if err := e.h.RunFinished(ctx, e.finished(*first.RunID)); err != nil {
		t.Fatalf("RunFinished: %v", err)
	}
	if n := e.Stream.Count(*first.RunID, runstream.EventEnd); n != 1 || e.endStatus(*first.RunID) != run.StatusCompleted {
		t.Errorf("end events of the finished run = %d (status %q), want one, completed", n, e.endStatus(*first.RunID))
	}
	r2 := e.request(second.RequestID)
	if r2.Status != queue.RequestDispatched || r2.DispatchedRunID == nil {
		t.Fatalf("the oldest queued request was not dispatched: %+v", r2)
	}
	if r3 := e.request(third.RequestID); r3.Status != queue.RequestQueued {
		t.Fatalf("the newer request jumped the queue: %+v", r3)
	}
	if n := e.activeRuns(th); n != 1 {
		t.Errorf("active runs = %d, want 1", n)
	}
	next, err := e.Runs.Get(ctx, *r2.DispatchedRunID)
	if err != nil || next.Status != run.StatusPending || next.RequestID != second.RequestID {
		t.Fatalf("dispatched run: %+v %v", next, err)
	}
	steps := e.WaitEvents(events.TypeStepReady, 2)
	if s := runtest.Decode[events.StepReady](t, steps[1]); s.RunID != next.ID || s.StepNo != 1 {
		t.Errorf("step.ready of the dispatched run = %+v", s)
	}

	e.completeQuietly(next.ID)
	if err := e.h.RunFinished(ctx, e.finished(next.ID)); err != nil {
		t.Fatalf("RunFinished of the second run: %v", err)
	}
	r3 := e.request(third.RequestID)
	if r3.Status != queue.RequestDispatched || r3.DispatchedRunID == nil {
		t.Fatalf("the third request was not dispatched after the second run: %+v", r3)
	}
	if n := e.Stream.Count(next.ID, runstream.EventEnd); n != 1 {
		t.Errorf("end events of the second run = %d, want 1", n)
	}
}

func TestDuplicateRunFinishedDeliveriesDispatchOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dispatcher.Config{})
	ctx := ctxT(t)
	th := e.Thread("alice")
	first := e.MustSubmit(e.alice, th, "one", "")
	second := e.MustSubmit(e.alice, th, "two", "")
	third := e.MustSubmit(e.alice, th, "three", "")
	e.completeQuietly(*first.RunID)
	ev := e.finished(*first.RunID)

	// Redeliveries racing each other: exactly one dispatch among them.
	const racing = 4
	var wg sync.WaitGroup
	errs := make(chan error, racing)
	for range racing {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- e.h.RunFinished(ctx, ev) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("RunFinished: %v", err)
		}
	}
	if r := e.request(second.RequestID); r.Status != queue.RequestDispatched {
		t.Fatalf("the deliveries did not dispatch: %+v", r)
	}
	if n := e.runsOf(th); n != 2 {
		t.Fatalf("%d concurrent deliveries left %d runs, want 2 (the finished one and one dispatched)", racing, n)
	}
	if n := e.Stream.Count(*first.RunID, runstream.EventEnd); n != 1 {
		t.Fatalf("concurrent deliveries wrote %d end events, want 1", n)
	}
	runs, steps := e.runsOf(th), e.Count(`SELECT count(*) FROM outbox WHERE type = $1`, events.TypeStepReady)
	streamLen := len(e.Stream.Read(*first.RunID))

	for i := 0; i < 2; i++ {
		if err := e.h.RunFinished(ctx, ev); err != nil {
			t.Fatalf("duplicate %d: %v", i+1, err)
		}
	}
	if n := e.runsOf(th); n != runs {
		t.Errorf("duplicates created %d runs", n-runs)
	}
	if n := e.Count(`SELECT count(*) FROM outbox WHERE type = $1`, events.TypeStepReady); n != steps {
		t.Errorf("duplicates emitted %d step.ready events", n-steps)
	}
	if r := e.request(third.RequestID); r.Status != queue.RequestQueued {
		t.Errorf("a duplicate dispatched the third request while the second runs: %+v", r)
	}
	if n := len(e.Stream.Read(*first.RunID)); n != streamLen {
		t.Errorf("duplicates appended %d stream events", n-streamLen)
	}
	if n := e.Stream.Count(*first.RunID, runstream.EventEnd); n != 1 {
		t.Errorf("end events = %d, want 1", n)
	}
}

func TestAFailedOrCancelledRunPausesTheBacklog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status     string
		end        func(e env, runID string)
		closingEvt string
	}{
		{run.StatusFailed, func(e env, id string) {
			if _, changed, err := e.quiet.Finish(context.Background(), id, run.Finish{Status: run.StatusFailed, ErrorType: "model_error", ErrorMessage: "boom"}); err != nil || !changed {
				e.T.Fatalf("fail: %v %v", changed, err)
			}
		}, runstream.EventError},
		{run.StatusCancelled, func(e env, id string) {
			if _, outcome, err := e.quiet.RequestCancel(context.Background(), "alice", id); err != nil || outcome != run.CancelImmediate {
				e.T.Fatalf("cancel: %v %v", outcome, err)
			}
		}, runstream.EventInterrupt},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, dispatcher.Config{})
			ctx := ctxT(t)
			th := e.Thread("alice")
			first := e.MustSubmit(e.alice, th, "one", "")
			waiting := e.MustSubmit(e.alice, th, "two", "")
			tc.end(e, *first.RunID)
			if n := len(e.Stream.Read(*first.RunID)); n != 0 {
				t.Fatalf("setup: the quiet store wrote %d stream events", n)
			}

			if err := e.h.RunFinished(ctx, e.finished(*first.RunID)); err != nil {
				t.Fatalf("RunFinished: %v", err)
			}
			if n := e.Stream.Count(*first.RunID, tc.closingEvt); n != 1 {
				t.Errorf("%s events = %d, want 1", tc.closingEvt, n)
			}
			if n := e.Stream.Count(*first.RunID, runstream.EventEnd); n != 1 || e.endStatus(*first.RunID) != tc.status {
				t.Errorf("end events = %d (status %q), want one, %s", n, e.endStatus(*first.RunID), tc.status)
			}
			if r := e.request(waiting.RequestID); r.Status != queue.RequestQueued {
				t.Errorf("a %s run must pause the backlog, but the next request is %s", tc.status, r.Status)
			}
			if n := e.runsOf(th); n != 1 {
				t.Errorf("runs = %d, want 1", n)
			}
			snap, err := e.Queue.Snapshot(ctx, "alice", "default-chatbot", th)
			if err != nil || snap.Queue.Status != "paused" || snap.Queue.PausedReason == nil || *snap.Queue.PausedReason != tc.status {
				t.Errorf("queue state = %+v %v, want paused (%s)", snap.Queue, err, tc.status)
			}
		})
	}
}

func TestSweepRedrivesAStaleRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dispatcher.Config{Sweep: run.SweepConfig{Stale: time.Hour}})
	ctx := ctxT(t)
	in := e.MustSubmit(e.alice, e.Thread("alice"), "hello", "")
	id := *in.RunID
	if c, err := e.Runs.Claim(ctx, id, 1, "dead-worker", time.Hour); err != nil || c.Outcome != run.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	// The worker died; its lease ran out (in the database's clock).
	if _, err := e.Pool.Exec(ctx, `UPDATE agent_runs SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}

	if err := e.h.Sweep(ctx, events.SweepRequested{}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	r, _ := e.Runs.Get(ctx, id)
	if r.RecoveryCount != 1 || r.WorkerID != nil || r.Status != run.StatusRunning {
		t.Fatalf("run after the sweep: %+v", r)
	}
	if n := e.Count(`SELECT count(*) FROM outbox WHERE type = $1 AND data->>'run_id' = $2 AND (data->>'step_no')::int = 1`, events.TypeStepReady, id); n != 2 {
		t.Errorf("step.ready rows for step 1 = %d, want 2 (intake's and the sweep's)", n)
	}
	steps := e.WaitEvents(events.TypeStepReady, 2)
	if s := runtest.Decode[events.StepReady](t, steps[1]); s.RunID != id || s.StepNo != 1 {
		t.Errorf("re-driven step = %+v", s)
	}
	if c, err := e.Runs.Claim(ctx, id, 1, "new-worker", time.Minute); err != nil || c.Outcome != run.Claimed || !c.Retry {
		t.Errorf("the re-driven step must be claimable as a retry: %+v %v", c, err)
	}
}

func TestSweepDispatchesAReadyQueueWhoseEventWasLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, dispatcher.Config{QueueGrace: time.Minute, Sweep: run.SweepConfig{Stale: time.Hour}})
	ctx := ctxT(t)
	lost, fresh := e.Thread("alice"), e.Thread("alice")
	first := e.MustSubmit(e.alice, lost, "one", "")
	waiting := e.MustSubmit(e.alice, lost, "two", "")
	e.completeQuietly(*first.RunID) // its run.finished is never handled
	// The request waited past the grace (its clock moved rather than slept through).
	if _, err := e.Pool.Exec(ctx, `UPDATE agent_run_requests SET created_at = created_at - interval '2 minutes' WHERE request_id = $1`, waiting.RequestID); err != nil {
		t.Fatal(err)
	}
	// A queue inside its grace is left to its own run.finished.
	otherFirst := e.MustSubmit(e.alice, fresh, "a", "")
	otherWaiting := e.MustSubmit(e.alice, fresh, "b", "")
	e.completeQuietly(*otherFirst.RunID)

	if err := e.h.Sweep(ctx, events.SweepRequested{}); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	r := e.request(waiting.RequestID)
	if r.Status != queue.RequestDispatched || r.DispatchedRunID == nil {
		t.Fatalf("the waiting request was not dispatched: %+v", r)
	}
	if n := e.activeRuns(lost); n != 1 {
		t.Errorf("active runs = %d, want 1", n)
	}
	if n := e.Count(`SELECT count(*) FROM outbox WHERE type = $1 AND data->>'run_id' = $2`, events.TypeStepReady, *r.DispatchedRunID); n != 1 {
		t.Errorf("step.ready rows of the dispatched run = %d, want 1", n)
	}
	if o := e.request(otherWaiting.RequestID); o.Status != queue.RequestQueued {
		t.Errorf("a queue inside its grace was dispatched by the sweep: %+v", o)
	}

	// A second sweep finds nothing more to do.
	runs := e.runsOf(lost)
	if err := e.h.Sweep(ctx, events.SweepRequested{}); err != nil {
		t.Fatalf("second Sweep: %v", err)
	}
	if n := e.runsOf(lost); n != runs {
		t.Errorf("the second sweep created %d runs", n-runs)
	}
}
