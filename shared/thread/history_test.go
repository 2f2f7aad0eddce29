package thread_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// claim takes the lease on the run's next step, failing the test otherwise.
func claim(t *testing.T, f *runtest.Fixture, runID string) run.Claim {
	t.Helper()
	r, err := f.Runs.Get(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Runs.Claim(context.Background(), runID, r.StepCount+1, "w", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		t.Fatalf("claim %s: %v %v", runID, c.Outcome, err)
	}
	return c
}

func TestHistoryShowsTheTranscriptWithToolResults(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	ctx := context.Background()
	alice := f.User("alice")
	th := f.Thread("alice")

	first := f.MustSubmit(alice, th, "what is the weather?", "")
	queued := f.MustSubmit(alice, th, "and tomorrow?", "")
	cancelled := f.MustSubmit(alice, th, "never mind", "")
	rejected := f.MustSubmit(alice, th, "hello?", "reject")
	if first.Status != "dispatched" || queued.Status != "queued" || cancelled.Status != "queued" || rejected.Status != "rejected" {
		t.Fatalf("setup: %s %s %s %s", first.Status, queued.Status, cancelled.Status, rejected.Status)
	}
	if _, err := f.Queue.CancelRequest(ctx, "alice", cancelled.RequestID); err != nil {
		t.Fatal(err)
	}

	// Step 1: the model calls two tools; one succeeds, one fails.
	c := claim(t, f, *first.RunID)
	step1, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt},
		StartedAt: time.Now(), Content: "Let me check.", StreamMessageID: "s1",
		ToolCalls: []run.NewToolCall{
			{ID: "call_a", Name: "weather", Arguments: `{"city": "Paris"}`},
			{ID: "call_b", Name: "calendar", Arguments: `not json`},
		}})
	if err != nil || step1.Outcome != run.OutcomeTools {
		t.Fatalf("commit step 1: %+v %v", step1, err)
	}
	if _, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: *first.RunID, ToolCallID: "call_a", Status: "success", Output: "sunny, 21°C"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Runs.CompleteToolCall(ctx, run.ToolResult{RunID: *first.RunID, ToolCallID: "call_b", Status: "error", Output: "Error: no calendar", Error: "no calendar"}); err != nil {
		t.Fatal(err)
	}
	// Step 2: the answer.
	f.Complete(*first.RunID, "It is sunny in Paris.")

	h, err := f.Threads.History(ctx, "alice", th)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 {
		t.Fatalf("history has %d items, want 3 (question, tool turn, answer): %s", len(h), runtest.Str(h))
	}
	q, turn, answer := h[0], h[1], h[2]
	if q.Type != "human" || q.Content != "what is the weather?" || *q.RequestID != first.RequestID || *q.RunID != *first.RunID ||
		*q.DeliveryStatus != "complete" || q.ID != first.MessageID || q.ErrorType != nil || q.RunStartedAt != nil || len(q.ToolCalls) != 0 {
		t.Errorf("question: %s", runtest.Str(q))
	}
	if turn.Type != "ai" || turn.Content != "Let me check." || turn.MessageType != "tool_call" || *turn.RunID != *first.RunID ||
		turn.RunStartedAt == nil || turn.RunFinishedAt == nil {
		t.Errorf("tool turn: %s", runtest.Str(turn))
	}
	if len(turn.ToolCalls) != 2 {
		t.Fatalf("tool calls: %s", runtest.Str(turn.ToolCalls))
	}
	a, b := turn.ToolCalls[0], turn.ToolCalls[1]
	if a.ID != "call_a" || a.Name != "weather" || a.Function["name"] != "weather" || a.Status != "success" || a.ErrorMessage != nil ||
		a.ToolCallResult == nil || (*a.ToolCallResult)["content"] != "sunny, 21°C" {
		t.Errorf("call a: %s", runtest.Str(a))
	}
	if args, ok := a.Args.(map[string]any); !ok || args["city"] != "Paris" {
		t.Errorf("call a args are parsed JSON: %#v", a.Args)
	}
	if b.ID != "call_b" || b.Status != "error" || b.ErrorMessage == nil || *b.ErrorMessage != "no calendar" ||
		b.ToolCallResult == nil || (*b.ToolCallResult)["content"] != "Error: no calendar" || b.Args != "not json" {
		t.Errorf("call b: %s", runtest.Str(b))
	}
	if answer.Type != "ai" || answer.Content != "It is sunny in Paris." || answer.MessageType != "text" || len(answer.ToolCalls) != 0 || answer.ToolCalls == nil {
		t.Errorf("answer: %s", runtest.Str(answer))
	}
	if !(q.ID < turn.ID && turn.ID < answer.ID) {
		t.Errorf("not in transcript order: %d %d %d", q.ID, turn.ID, answer.ID)
	}
	// No tool messages of their own: results are folded into the calls.
	for _, it := range h {
		if it.Type == "tool" {
			t.Errorf("separate tool message: %s", runtest.Str(it))
		}
	}
	// The hidden messages are stored, just not shown.
	if n := f.Count(`SELECT count(*) FROM messages WHERE role = 'user' AND delivery_status IN ('queued', 'cancelled', 'rejected')`); n != 3 {
		t.Fatalf("hidden user messages stored: %d, want 3", n)
	}

	// The queued message enters the history when it is dispatched; its run fails.
	next, err := f.Queue.DispatchNext(ctx, "alice", "default-chatbot", th)
	if err != nil || next == "" {
		t.Fatalf("dispatch queued: %q %v", next, err)
	}
	f.Fail(next)
	h, err = f.Threads.History(ctx, "alice", th)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 4 {
		t.Fatalf("after dispatch: %d items: %s", len(h), runtest.Str(h))
	}
	last := h[3]
	if last.Type != "human" || last.Content != "and tomorrow?" || *last.RunID != next || *last.DeliveryStatus != "failed" ||
		last.ErrorType == nil || *last.ErrorType != "test" || last.ErrorMessage == nil || *last.ErrorMessage != "boom" {
		t.Errorf("failed question: %s", runtest.Str(last))
	}
	for _, it := range h {
		if it.Content == "never mind" || it.Content == "hello?" {
			t.Errorf("cancelled or rejected message shown: %s", runtest.Str(it))
		}
	}

	// JSON shape the UI reads.
	raw, _ := json.Marshal(h[1])
	var shape map[string]any
	_ = json.Unmarshal(raw, &shape)
	for _, k := range []string{"id", "type", "content", "created_at", "run_id", "request_id", "delivery_status", "error_type", "error_message",
		"extra_metadata", "message_type", "image_content", "feedback", "tool_calls", "run_started_at", "run_finished_at"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("history item lacks %q: %s", k, raw)
		}
	}
	calls, _ := shape["tool_calls"].([]any)
	call, _ := calls[0].(map[string]any)
	for _, k := range []string{"id", "name", "function", "args", "tool_call_result", "status", "error_message"} {
		if _, ok := call[k]; !ok {
			t.Errorf("tool call lacks %q: %s", k, raw)
		}
	}
}

func TestHistoryOfAPendingToolCall(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	ctx := context.Background()
	alice := f.User("alice")
	th := f.Thread("alice")
	in := f.MustSubmit(alice, th, "go", "")
	c := claim(t, f, *in.RunID)
	if _, err := f.Runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt},
		StartedAt: time.Now(), StreamMessageID: "s1", ToolCalls: []run.NewToolCall{{ID: "call_p", Name: "slow", Arguments: `{}`}}}); err != nil {
		t.Fatal(err)
	}
	h, err := f.Threads.History(ctx, "alice", th)
	if err != nil || len(h) != 2 {
		t.Fatalf("history: %s %v", runtest.Str(h), err)
	}
	call := h[1].ToolCalls
	if len(call) != 1 || call[0].Status != "pending" || call[0].ToolCallResult != nil {
		t.Fatalf("pending call: %s", runtest.Str(call))
	}
	// Another user sees nothing.
	if _, err := f.Threads.History(ctx, "bob", th); !errors.Is(err, thread.ErrNotFound) {
		t.Fatalf("bob reads alice's history: %v", err)
	}
	// An empty thread has an empty, non-nil history.
	empty := f.Thread("alice")
	if h, err := f.Threads.History(ctx, "alice", empty); err != nil || h == nil || len(h) != 0 {
		t.Fatalf("empty history: %#v %v", h, err)
	}
}
