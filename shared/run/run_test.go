package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
)

func started(t *testing.T) (*runtest.Fixture, string) {
	t.Helper()
	f := runtest.New(t)
	alice := f.User("alice")
	in := f.MustSubmit(alice, f.Thread("alice"), "hello", "")
	return f, *in.RunID
}

func TestClaimIsExclusiveAndCountsAttempts(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	var claimed atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := f.Runs.Claim(ctx, id, 1, fmt.Sprintf("w%d", i), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if c.Outcome == run.Claimed {
				claimed.Add(1)
			} else if c.Outcome != run.Busy {
				t.Errorf("loser outcome %s", c.Outcome)
			}
		}(i)
	}
	wg.Wait()
	if claimed.Load() != 1 {
		t.Fatalf("%d workers claimed the same step", claimed.Load())
	}
	r, _ := f.Runs.Get(ctx, id)
	if r.Status != run.StatusRunning || r.AttemptCount != 1 || r.StartedAt == nil {
		t.Errorf("claimed run: %+v", r)
	}
	if n := f.Count(`SELECT count(*) FROM agent_run_attempts WHERE run_id = $1 AND step_no = 1 AND finished_at IS NULL`, id); n != 1 {
		t.Errorf("open attempts: %d", n)
	}
}

func TestExpiredLeaseIsTakenOverAndTheOldOwnerCannotCommit(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	old, err := f.Runs.Claim(ctx, id, 1, "old", time.Minute)
	if err != nil || old.Outcome != run.Claimed || old.Retry {
		t.Fatal(old, err)
	}
	if c, _ := f.Runs.Claim(ctx, id, 1, "new", time.Minute); c.Outcome != run.Busy {
		t.Fatalf("a live lease was taken over: %s", c.Outcome)
	}
	expireLease(t, f, id)
	fresh, err := f.Runs.Claim(ctx, id, 1, "new", time.Minute)
	if err != nil || fresh.Outcome != run.Claimed || !fresh.Retry || fresh.Attempt != 2 {
		t.Fatalf("takeover: %+v %v", fresh, err)
	}
	_, err = f.Runs.CommitStep(ctx, run.StepCommit{Run: old.Run, StepNo: 1, Owner: run.Owner{Worker: "old", Attempt: old.Attempt}, StartedAt: time.Now(), Content: "stale"})
	if !errors.Is(err, run.ErrLeaseLost) {
		t.Fatalf("stale owner committed: %v", err)
	}
	if n := f.Count(`SELECT count(*) FROM agent_run_steps WHERE run_id = $1`, id); n != 0 {
		t.Fatalf("stale commit left a step record")
	}
	if err := f.Runs.Renew(ctx, id, "old", old.Attempt, time.Minute); !errors.Is(err, run.ErrLeaseLost) {
		t.Errorf("stale owner renewed: %v", err)
	}
	res, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: fresh.Run, StepNo: 1, Owner: run.Owner{Worker: "new", Attempt: fresh.Attempt}, StartedAt: time.Now(), Content: "answer"})
	if err != nil || res.Outcome != run.OutcomeCompleted {
		t.Fatalf("current owner commit: %+v %v", res, err)
	}
	if n := f.Count(`SELECT count(*) FROM agent_run_attempts WHERE run_id = $1 AND outcome = 'lease_expired'`, id); n != 1 {
		t.Errorf("the expired attempt should be closed as lease_expired (%d)", n)
	}
}

func TestStepIsCommittedExactlyOnce(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	commit := run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), Content: "hi",
		TokenUsage: run.AddUsage(nil, "fake:model", run.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5, Reported: true})}
	res, err := f.Runs.CommitStep(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Runs.CommitStep(ctx, commit); !errors.Is(err, run.ErrDuplicateStep) {
		t.Fatalf("second commit: %v", err)
	}
	r, _ := f.Runs.Get(ctx, id)
	if r.Status != run.StatusCompleted || r.OutputMessageID == nil || *r.OutputMessageID != res.MessageID || r.StepCount != 1 || r.FinishedAt == nil {
		t.Fatalf("completed run: %+v", r)
	}
	var usage run.TokenUsage
	_ = json.Unmarshal(r.TokenUsage, &usage)
	if usage.Total.TotalTokens != 5 || !usage.Complete || usage.ModelCallCount != 1 {
		t.Errorf("token usage: %s", r.TokenUsage)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant'`, id); n != 1 {
		t.Errorf("assistant messages: %d", n)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE id = $1 AND delivery_status = 'complete'`, *r.InputMessageID); n != 1 {
		t.Errorf("input message not complete")
	}
	f.WaitEvents(events.TypeRunFinished, 1)
	// Claiming a finished run does nothing.
	if c, _ := f.Runs.Claim(ctx, id, 2, "w2", time.Minute); c.Outcome != run.Gone {
		t.Errorf("claim after completion: %s", c.Outcome)
	}
}

func TestToolCallsFanOutAndTheLastOneReadiesTheNextStep(t *testing.T) {
	t.Parallel()
	f, id := started(t)
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, id, 1, "w", time.Minute)
	calls := []run.NewToolCall{{ID: "a", Name: "mark_for_improvement", Arguments: `{"reason":"x"}`}, {ID: "b", Name: "x", Arguments: `{}`}, {ID: "c", Name: "x", Arguments: `{}`}}
	res, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(), ToolCalls: calls})
	if err != nil || res.Outcome != run.OutcomeTools {
		t.Fatalf("%+v %v", res, err)
	}
	evs := f.WaitEvents(events.TypeToolCallRequested, 3)
	if len(evs) != 3 {
		t.Fatalf("tool events: %d", len(evs))
	}
	// Step 2 cannot be claimed while tools run.
	if c2, _ := f.Runs.Claim(ctx, id, 2, "w2", time.Minute); c2.Outcome == run.Claimed {
		t.Fatal("next step claimed before its tool calls finished")
	}
	var wg sync.WaitGroup
	var readied atomic.Int32
	for _, tc := range calls {
		wg.Add(1)
		go func(tc run.NewToolCall) {
			defer wg.Done()
			fan, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: id, ToolCallID: tc.ID, Status: "success", Output: "ok " + tc.ID})
			if err != nil {
				t.Error(err)
			}
			if fan.NextStep == 2 {
				readied.Add(1)
			}
		}(tc)
	}
	wg.Wait()
	if readied.Load() != 1 {
		t.Fatalf("next step readied %d times", readied.Load())
	}
	if fan, _ := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: id, ToolCallID: "a", Status: "success", Output: "again"}); !fan.Duplicate {
		t.Error("completing a finished call must be a no-op")
	}
	steps := f.WaitEvents(events.TypeStepReady, 2)
	if got := runtest.Decode[events.StepReady](t, steps[1]); got.StepNo != 2 {
		t.Errorf("step event: %+v", got)
	}
	entries, err := f.Runs.Transcript(ctx, c.Run.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Role != "user" || len(entries[1].ToolCalls) != 3 || entries[1].ToolCalls[1].ResultText() != "ok b" {
		t.Fatalf("transcript: %+v", entries)
	}
	c2, err := f.Runs.Claim(ctx, id, 2, "w2", time.Minute)
	if err != nil || c2.Outcome != run.Claimed || c2.Retry {
		t.Fatalf("claim step 2: %+v %v", c2, err)
	}
}

func TestInterruptedToolEndsTheRunAndResumeAnswersIt(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	in := f.MustSubmit(alice, th, "plan a trip", "")
	ctx := context.Background()
	c, _ := f.Runs.Claim(ctx, *in.RunID, 1, "w", time.Minute)
	_, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(),
		ToolCalls: []run.NewToolCall{{ID: "ask", Name: "ask_user_question", Arguments: `{"questions":[{"question":"Where to?"}]}`}}})
	if err != nil {
		t.Fatal(err)
	}
	fan, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: *in.RunID, ToolCallID: "ask", Status: "interrupted",
		Output: `{"interrupt":"ask_user_question_required","questions":[{"question_id":"q-1","question":"Where to?"}]}`})
	if err != nil || !fan.Interrupted || fan.NextStep != 0 {
		t.Fatalf("%+v %v", fan, err)
	}
	r, _ := f.Runs.Get(ctx, *in.RunID)
	if r.Status != run.StatusInterrupted || *r.ErrorType != "ask_user_question_required" || *r.ErrorMessage != "Where to?" {
		t.Fatalf("interrupted run: %+v", r)
	}
	resumed, err := f.Queue.Resume(ctx, queueResume(alice, th, *in.RunID, `{"q-1":"Kyoto"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.Queue.Resume(ctx, queueResume(alice, th, *in.RunID, `{"q-1":"Kyoto"}`))
	if err != nil || again.RunID != resumed.RunID {
		t.Fatalf("double resume must be idempotent: %+v %v", again, err)
	}
	entries, _ := f.Runs.Transcript(ctx, r.ConversationID)
	last := entries[len(entries)-1]
	if len(last.ToolCalls) != 1 || last.ToolCalls[0].Status != "success" || last.ToolCalls[0].ResultText() != `{"answer":{"q-1":"Kyoto"},"questions":[{"question_id":"q-1","question":"Where to?"}]}` {
		t.Fatalf("answer not recorded as the tool result: %+v", last.ToolCalls)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE message_type = 'resume' AND transcript_seq IS NULL`); n != 1 {
		t.Errorf("resume message should be stored outside the transcript")
	}
	// The interrupted run can no longer be resumed with another answer.
	if _, err := f.Queue.Resume(ctx, queueResume(alice, th, *in.RunID, `{"q-1":"Osaka"}`)); err == nil {
		t.Error("second different resume accepted")
	}
}
