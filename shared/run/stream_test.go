package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// streamed is a fixture whose run store writes to a real Redis stream.
type streamed struct {
	*runtest.Fixture
	runs *run.Store
	read func(runID string) []runtest.StreamEntry
}

func newStreamed(t *testing.T) streamed {
	t.Helper()
	f := runtest.NewStreamed(t)
	return streamed{Fixture: f, runs: f.Runs, read: f.Stream.Read}
}

func eventNames(entries []runtest.StreamEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Event
	}
	return out
}

func sameEvents(got []runtest.StreamEntry, want ...string) bool {
	g := eventNames(got)
	if len(g) != len(want) {
		return false
	}
	for i := range g {
		if g[i] != want[i] {
			return false
		}
	}
	return true
}

func TestFinishClosesTheStreamOnceAndCloseStreamAddsNothing(t *testing.T) {
	t.Parallel()
	s := newStreamed(t)
	alice := s.User("alice")
	in := s.MustSubmit(alice, s.Thread("alice"), "hi", "")
	ctx := context.Background()

	if _, err := s.runs.CloseStream(ctx, *in.RunID); !errors.Is(err, run.ErrNotTerminal) {
		t.Fatalf("closing the stream of a pending run: %v", err)
	}
	if got := s.read(*in.RunID); len(got) != 0 {
		t.Fatalf("a pending run's stream was written: %v", eventNames(got))
	}
	if _, changed, err := s.runs.Finish(ctx, *in.RunID, run.Finish{Status: run.StatusFailed, ErrorType: "model_error", ErrorMessage: "boom"}); err != nil || !changed {
		t.Fatalf("finish: %v %v", changed, err)
	}
	got := s.read(*in.RunID)
	if !sameEvents(got, runstream.EventError, runstream.EventEnd) {
		t.Fatalf("closing events %v, want error, end", eventNames(got))
	}
	if end := got[1].Payload; end["status"] != run.StatusFailed || end["request_id"] != in.RequestID {
		t.Errorf("end payload %v", end)
	}
	// run.finished's guarantee path finds everything written.
	r, err := s.runs.CloseStream(ctx, *in.RunID)
	if err != nil || r.Status != run.StatusFailed {
		t.Fatalf("close stream: %+v %v", r, err)
	}
	if got := s.read(*in.RunID); len(got) != 2 {
		t.Fatalf("CloseStream wrote again: %v", eventNames(got))
	}
}

func TestCancelOfAPendingRunClosesItsStream(t *testing.T) {
	t.Parallel()
	s := newStreamed(t)
	alice := s.User("alice")
	in := s.MustSubmit(alice, s.Thread("alice"), "hi", "")
	_, outcome, err := s.runs.RequestCancel(context.Background(), "alice", *in.RunID)
	if err != nil || outcome != run.CancelImmediate {
		t.Fatalf("cancel: %v %v", outcome, err)
	}
	got := s.read(*in.RunID)
	if !sameEvents(got, runstream.EventInterrupt, runstream.EventEnd) || got[0].Payload["reason"] != "cancelled" {
		t.Fatalf("closing events %v %v", eventNames(got), got)
	}
}

func TestAnInterruptingToolResultPrecedesTheClosingEvents(t *testing.T) {
	t.Parallel()
	s := newStreamed(t)
	alice := s.User("alice")
	in := s.MustSubmit(alice, s.Thread("alice"), "plan a trip", "")
	ctx := context.Background()
	c, _ := s.runs.Claim(ctx, *in.RunID, 1, "w", time.Minute)
	commit := run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt}, StartedAt: time.Now(),
		StreamMessageID: "m1", ToolCalls: []run.NewToolCall{{ID: "ask", Name: "ask_user_question", Arguments: `{"questions":[{"question":"Where to?"}]}`}}}
	res, err := s.runs.CommitStep(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	s.runs.StreamStep(ctx, commit, res)
	tool := runstream.OnceEvent{Type: runstream.EventCustom, Payload: runstream.Custom[runstream.ToolEventChunk]{Name: runstream.CustomStreamEvent}}
	fan, err := s.runs.CompleteToolCall(ctx, run.ToolResult{RunID: *in.RunID, ThreadID: c.Run.ThreadID, ToolCallID: "ask", Status: run.ToolInterrupted,
		Output: `{"interrupt":"ask_user_question_required","questions":[{"question":"Where to?"}]}`, Stream: []runstream.OnceEvent{tool}})
	if err != nil || !fan.Interrupted {
		t.Fatalf("%+v %v", fan, err)
	}
	got := s.read(*in.RunID)
	if !sameEvents(got, runstream.EventCustom, runstream.EventCustom, runstream.EventInterrupt, runstream.EventEnd) {
		t.Fatalf("stream %v, want message_final, tool event, interrupt, end", eventNames(got))
	}
	if got[0].Payload["name"] != runstream.CustomMessageFinal || got[1].Payload["name"] != runstream.CustomStreamEvent {
		t.Errorf("custom events %v, %v", got[0].Payload["name"], got[1].Payload["name"])
	}
	chunk, _ := got[2].Payload["chunk"].(map[string]any)
	if qs, _ := chunk["questions"].([]any); len(qs) != 1 || got[3].Payload["status"] != run.StatusInterrupted {
		t.Errorf("interrupt %v, end %v", got[2].Payload, got[3].Payload)
	}
	// A redelivered result records nothing and writes nothing.
	if fan, err := s.runs.CompleteToolCall(ctx, run.ToolResult{RunID: *in.RunID, ThreadID: c.Run.ThreadID, ToolCallID: "ask",
		Status: run.ToolInterrupted, Stream: []runstream.OnceEvent{tool}}); err != nil || !fan.Duplicate {
		t.Fatalf("duplicate: %+v %v", fan, err)
	}
	if n := len(s.read(*in.RunID)); n != 4 {
		t.Errorf("a duplicate result wrote to the stream: %d entries", n)
	}
}

// A result that readies the next step streams its events before step.ready
// is published (so before anything the next step streams), and the caller
// does not wait for that append.
func TestAResultsStreamEventsPrecedeTheNextStepsEvent(t *testing.T) {
	t.Parallel()
	f := runtest.NewStreamed(t)
	ctx := context.Background()
	seen := make(chan []runtest.StreamEntry, 1)
	relay := outbox.NewRelay(f.Pool, outbox.PublisherFunc(func(_ context.Context, ev cloudevents.Event) error {
		if ev.Type() == events.TypeStepReady {
			var p events.StepReady
			_ = json.Unmarshal(ev.Data(), &p)
			seen <- f.Stream.Read(p.RunID) // the stream as the next step would find it
		}
		return nil
	}), outbox.RelayConfig{Claim: 5 * time.Second, AckInterval: time.Millisecond}, nil)
	t.Cleanup(relay.Wait)
	runs := run.NewStore(f.Pool, &outbox.Outbox{Writer: f.Outbox.Writer, Relay: relay}, f.Stream.Writer, nil)

	alice := f.User("alice")
	in := f.MustSubmit(alice, f.Thread("alice"), "add", "")
	c, err := runs.Claim(ctx, *in.RunID, 1, "w", time.Minute)
	if err != nil || c.Outcome != run.Claimed {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if res, err := runs.CommitStep(ctx, run.StepCommit{Run: c.Run, StepNo: 1, Owner: run.Owner{Worker: "w", Attempt: c.Attempt},
		StartedAt: time.Now(), StreamMessageID: "m1", ToolCalls: []run.NewToolCall{{ID: "sum", Name: "get_sum", Arguments: `{}`}}}); err != nil || res.Outcome != run.OutcomeTools {
		t.Fatalf("commit step: %+v %v", res, err)
	}
	finished := runstream.OnceEvent{Type: runstream.EventCustom, Payload: runstream.Custom[runstream.ToolEventChunk]{Name: runstream.CustomStreamEvent}}
	earlier := make(chan struct{}) // an append of the caller's still under way
	done := make(chan run.FanIn, 1)
	go func() {
		fan, err := runs.CompleteToolCall(ctx, run.ToolResult{RunID: *in.RunID, ThreadID: c.Run.ThreadID, StepNo: 1, ToolCallID: "sum",
			Status: run.ToolSuccess, Output: "5", Stream: []runstream.OnceEvent{finished}, StreamAfter: earlier})
		if err != nil {
			t.Error(err)
		}
		done <- fan
	}()
	select {
	case fan := <-done:
		if fan.NextStep != 2 {
			t.Fatalf("fan-in %+v, want step 2 readied", fan)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CompleteToolCall waited for the stream append")
	}
	if got := f.Stream.Read(*in.RunID); len(got) != 0 {
		t.Fatalf("appended ahead of the earlier append: %v", eventNames(got))
	}
	close(earlier)
	if got := <-seen; !sameEvents(got, runstream.EventCustom) || got[0].Payload["name"] != runstream.CustomStreamEvent {
		t.Fatalf("when step.ready was published the stream held %v, want the result's event", eventNames(got))
	}
}
