package agentstep_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// env is one agent-step handler over a fresh database, a real Redis run
// stream and a scripted model ("fake:model", the queue's default).
type env struct {
	*runtest.Fixture
	model *llmtest.Server
	h     *agentstep.Handler
}

func newEnv(t *testing.T) env {
	t.Helper()
	f := runtest.NewStreamed(t)
	model := llmtest.NewServer(t)
	models, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_FAKE_BASE_URL=" + model.URL()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := agentstep.New(f.Runs, models, f.Tools, f.Stream, agentstep.Config{WorkerID: "step-under-test",
		FlushEvery: 5 * time.Millisecond, RetryBackoff: time.Millisecond}, nil)
	return env{Fixture: f, model: model, h: h}
}

// submit sends query on a new thread of alice and returns the step.ready
// event of the dispatched run's first step.
func (e env) submit(query string) events.StepReady {
	e.T.Helper()
	alice := e.User("alice")
	in := e.MustSubmit(alice, e.Thread("alice"), query, "")
	if in.RunID == nil {
		e.T.Fatalf("submit on an idle thread was not dispatched: %+v", in)
	}
	return events.StepReady{RunID: *in.RunID, ThreadID: in.ThreadID, StepNo: 1}
}

func (e env) run(id string) run.Run {
	e.T.Helper()
	r, err := e.Runs.Get(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// outboxCount counts events of a type written for run id (published or not).
func (e env) outboxCount(eventType, runID string) int {
	e.T.Helper()
	return e.Count(`SELECT count(*) FROM outbox WHERE type = $1 AND data->>'run_id' = $2`, eventType, runID)
}

// streamedText joins the text of every message delta in the run's stream.
func (e env) streamedText(runID string) string {
	e.T.Helper()
	var b strings.Builder
	for _, ev := range e.Stream.Read(runID) {
		if ev.Event != runstream.EventMessages {
			continue
		}
		items, _ := ev.Payload["items"].([]any)
		for _, it := range items {
			chunk, _ := it.(map[string]any)
			se, _ := chunk["stream_event"].(map[string]any)
			if se["type"] == runstream.StreamMessageDelta {
				s, _ := se["content"].(string)
				b.WriteString(s)
			}
		}
	}
	return b.String()
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

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestATurnWithoutToolCallsCompletesTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	e.model.Enqueue(llmtest.Text("Hel", "lo ", "there"))

	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	reqs := e.model.Requests()
	if len(reqs) != 1 || reqs[0].LastUserMessage() != "hello" {
		t.Fatalf("the model should be asked once with the user's message: %+v", reqs)
	}
	r := e.run(in.RunID)
	if r.Status != run.StatusCompleted || r.StepCount != 1 || r.OutputMessageID == nil || r.FinishedAt == nil {
		t.Fatalf("run after the turn: %+v", r)
	}
	var content, role string
	if err := e.Pool.QueryRow(context.Background(), `SELECT role, content FROM messages WHERE id = $1`, *r.OutputMessageID).Scan(&role, &content); err != nil {
		t.Fatal(err)
	}
	if role != "assistant" || content != "Hello there" {
		t.Errorf("output message = %s %q, want the assistant's %q", role, content, "Hello there")
	}
	if n := e.Count(`SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant'`, in.RunID); n != 1 {
		t.Errorf("assistant messages = %d, want 1", n)
	}
	fin := runtest.Decode[events.RunFinished](t, e.WaitEvents(events.TypeRunFinished, 1)[0])
	if fin.RunID != in.RunID || fin.Status != run.StatusCompleted {
		t.Errorf("run.finished = %+v", fin)
	}
	if n := e.outboxCount(events.TypeToolCallRequested, in.RunID); n != 0 {
		t.Errorf("a turn without tool calls requested %d tool calls", n)
	}
	if got := e.streamedText(in.RunID); got != "Hello there" {
		t.Errorf("streamed text = %q", got)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventMetadata); n != 1 {
		t.Errorf("metadata events = %d, want 1", n)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 1 || e.endStatus(in.RunID) != run.StatusCompleted {
		t.Errorf("end events = %d (status %q), want exactly one, completed", n, e.endStatus(in.RunID))
	}
	evs := e.Stream.Read(in.RunID)
	if last := evs[len(evs)-1]; last.Event != runstream.EventEnd {
		t.Errorf("the stream must end with end, ends with %s", last.Event)
	}
}

func TestATurnWithToolCallsFansOutAndDoesNotFinish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("note two things")
	e.model.Enqueue(llmtest.Calls(
		llmtest.ToolCall{ID: "call_a", Name: "mark_for_improvement", Arguments: `{"reason":"first"}`},
		llmtest.ToolCall{ID: "call_b", Name: "mark_for_improvement", Arguments: `{"reason":"second"}`},
	))

	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}

	r := e.run(in.RunID)
	if r.Status != run.StatusRunning || r.StepCount != 1 || r.WorkerID != nil || r.FinishedAt != nil {
		t.Fatalf("the run must wait for its tools (running, step 1 committed, lease released): %+v", r)
	}
	rows, err := e.Pool.Query(context.Background(), `SELECT tool_call_id, tool_name, tool_input, status FROM tool_calls
		WHERE run_id = $1 AND step_no = 1 ORDER BY call_index`, in.RunID)
	if err != nil {
		t.Fatal(err)
	}
	type call struct{ id, name, input, status string }
	var calls []call
	for rows.Next() {
		var c call
		if err := rows.Scan(&c.id, &c.name, &c.input, &c.status); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	rows.Close()
	want := []call{{"call_a", "mark_for_improvement", `{"reason":"first"}`, run.ToolPending},
		{"call_b", "mark_for_improvement", `{"reason":"second"}`, run.ToolPending}}
	if len(calls) != len(want) {
		t.Fatalf("tool calls = %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("tool call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
	if n := e.Count(`SELECT pending_tools FROM agent_run_steps WHERE run_id = $1 AND step_no = 1`, in.RunID); n != 2 {
		t.Errorf("pending_tools = %d, want 2", n)
	}
	evs := e.WaitEvents(events.TypeToolCallRequested, 2)
	got := map[string]events.ToolCallRequested{}
	for _, ev := range evs {
		c := runtest.Decode[events.ToolCallRequested](t, ev)
		got[c.ToolCallID] = c
	}
	for _, id := range []string{"call_a", "call_b"} {
		if c, ok := got[id]; !ok || c.RunID != in.RunID || c.StepNo != 1 {
			t.Errorf("tool.call.requested for %s: %+v (all: %+v)", id, c, got)
		}
	}
	if n := e.outboxCount(events.TypeRunFinished, in.RunID); n != 0 {
		t.Errorf("a turn with tool calls emitted run.finished")
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 0 {
		t.Errorf("a turn with tool calls ended the stream")
	}
	if n := e.Count(`SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant' AND message_type = 'tool_call'`, in.RunID); n != 1 {
		t.Errorf("assistant tool_call messages = %d, want 1", n)
	}
}

func TestDuplicateStepReadyDeliveriesDoNothingTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	e.model.Enqueue(llmtest.Text("once"))
	ctx := ctxT(t)

	// Two deliveries at once: one claims the step, the other finds it held
	// (or already committed) and does nothing.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- e.h.Handle(ctx, in) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent delivery: %v", err)
		}
	}
	if r := e.run(in.RunID); r.Status != run.StatusCompleted || r.AttemptCount != 1 {
		t.Fatalf("the deliveries did not complete the run in one attempt: %+v", r)
	}
	before := e.Stream.Read(in.RunID)
	// The redelivery must not reach the model: NewServer fails the test on a
	// request without a scripted reply, and the count below says so too.
	if err := e.h.Handle(ctx, in); err != nil {
		t.Fatalf("duplicate delivery: %v", err)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("model called %d times for one step", n)
	}
	if n := e.Count(`SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant'`, in.RunID); n != 1 {
		t.Errorf("assistant messages = %d, want 1", n)
	}
	if n := e.Count(`SELECT count(*) FROM agent_run_steps WHERE run_id = $1`, in.RunID); n != 1 {
		t.Errorf("step records = %d, want 1", n)
	}
	if n := e.outboxCount(events.TypeRunFinished, in.RunID); n != 1 {
		t.Errorf("run.finished rows = %d, want 1", n)
	}
	if after := e.Stream.Read(in.RunID); len(after) != len(before) {
		t.Errorf("the duplicate appended %d stream events", len(after)-len(before))
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 1 {
		t.Errorf("end events = %d, want 1", n)
	}
}

func TestAStepWhoseLeaseIsHeldByAnotherWorkerIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	ctx := ctxT(t)
	held, err := e.Runs.Claim(ctx, in.RunID, 1, "other-worker", time.Hour)
	if err != nil || held.Outcome != run.Claimed {
		t.Fatalf("claim by the other worker: %+v %v", held, err)
	}

	if err := e.h.Handle(ctx, in); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Fatalf("the model was called while another worker holds the step")
	}
	r := e.run(in.RunID)
	if r.Status != run.StatusRunning || r.WorkerID == nil || *r.WorkerID != "other-worker" || r.AttemptCount != 1 || r.StepCount != 0 {
		t.Fatalf("the skipped step changed the run: %+v", r)
	}
	if n := len(e.Stream.Read(in.RunID)); n != 0 {
		t.Errorf("the skipped step wrote %d stream events", n)
	}

	// The other worker dies; once its lease has run out (in the database's
	// clock) the same delivery does the step: the skip was the lease's doing.
	if _, err := e.Pool.Exec(ctx, `UPDATE agent_runs SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`, in.RunID); err != nil {
		t.Fatal(err)
	}
	e.model.Enqueue(llmtest.Text("taken over"))
	if err := e.h.Handle(ctx, in); err != nil {
		t.Fatalf("Handle after the lease expired: %v", err)
	}
	r = e.run(in.RunID)
	if r.Status != run.StatusCompleted || r.AttemptCount != 2 || r.StepCount != 1 {
		t.Fatalf("run after the takeover: %+v", r)
	}
	if n := e.Count(`SELECT count(*) FROM agent_run_attempts WHERE run_id = $1 AND attempt_no = 2 AND worker_id = 'step-under-test'`, in.RunID); n != 1 {
		t.Errorf("the takeover is not this worker's attempt 2")
	}
	// The takeover tells clients to discard the earlier attempt's output.
	if n := countCustom(e.Stream.Read(in.RunID), runstream.CustomRetry); n != 1 {
		t.Errorf("retry markers = %d, want 1", n)
	}
}

func countCustom(evs []runtest.StreamEntry, name string) int {
	n := 0
	for _, ev := range evs {
		if ev.Event == runstream.EventCustom && ev.Payload["name"] == name {
			n++
		}
	}
	return n
}

func TestAModelErrorIsRetriedThenTheRunFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	// The default agent allows 2 retries: three 503s exhaust them.
	e.model.Enqueue(llmtest.Fail(503, "overloaded"), llmtest.Fail(503, "overloaded"), llmtest.Fail(503, "still overloaded"))

	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if n := len(e.model.Requests()); n != 3 {
		t.Errorf("model calls = %d, want 3 (1 + 2 retries)", n)
	}
	r := e.run(in.RunID)
	if r.Status != run.StatusFailed || r.ErrorType == nil || *r.ErrorType != "model_error" ||
		r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "still overloaded") {
		t.Fatalf("run after exhausted retries: %+v", r)
	}
	if n := e.Count(`SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant'`, in.RunID); n != 0 {
		t.Errorf("a failed turn committed %d assistant messages", n)
	}
	fin := runtest.Decode[events.RunFinished](t, e.WaitEvents(events.TypeRunFinished, 1)[0])
	if fin.RunID != in.RunID || fin.Status != run.StatusFailed {
		t.Errorf("run.finished = %+v", fin)
	}
	evs := e.Stream.Read(in.RunID)
	if n := countCustom(evs, runstream.CustomRetry); n != 2 {
		t.Errorf("retry markers = %d, want 2", n)
	}
	errEv, ok := e.Stream.Last(in.RunID, runstream.EventError)
	if n := e.Stream.Count(in.RunID, runstream.EventError); n != 1 || !ok {
		t.Fatalf("error events = %d, want 1", n)
	}
	if chunk, _ := errEv.Payload["chunk"].(map[string]any); chunk["error_type"] != "model_error" {
		t.Errorf("error event = %v", errEv.Payload)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 1 || e.endStatus(in.RunID) != run.StatusFailed {
		t.Errorf("end events = %d (status %q), want one, failed", n, e.endStatus(in.RunID))
	}
}

func TestAModelErrorThatClearsOnRetryCompletesTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	e.model.Enqueue(llmtest.Fail(503, "overloaded"), llmtest.Text("fine now"))

	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Errorf("model calls = %d, want 2", n)
	}
	r := e.run(in.RunID)
	if r.Status != run.StatusCompleted {
		t.Fatalf("run: %+v", r)
	}
	var content string
	if err := e.Pool.QueryRow(context.Background(), `SELECT content FROM messages WHERE id = $1`, *r.OutputMessageID).Scan(&content); err != nil || content != "fine now" {
		t.Errorf("answer = %q %v", content, err)
	}
	if n := countCustom(e.Stream.Read(in.RunID), runstream.CustomRetry); n != 1 {
		t.Errorf("retry markers = %d, want 1", n)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventError); n != 0 {
		t.Errorf("a recovered run streamed an error event")
	}
}

func TestANonRetryableModelErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("hello")
	e.model.Enqueue(llmtest.Fail(http.StatusBadRequest, "bad request"))

	if err := e.h.Handle(ctxT(t), in); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("model calls = %d, want 1 (a 400 is not retried)", n)
	}
	if r := e.run(in.RunID); r.Status != run.StatusFailed || *r.ErrorType != "model_error" {
		t.Fatalf("run: %+v", r)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 1 {
		t.Errorf("end events = %d, want 1", n)
	}
}

func TestCancellationMidStreamEndsTheRunCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := e.submit("tell me a long story")
	ctx := ctxT(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	reply := llmtest.Text("Once ", "upon ", "a ", "time")
	reply.Block, reply.BlockAfter = hold, 2 // stream two chunks, then hang
	e.model.Enqueue(reply)

	done := make(chan error, 1)
	go func() { done <- e.h.Handle(ctx, in) }()

	// Wait for the state, not a time: the first tokens reached the stream.
	deadline := time.Now().Add(10 * time.Second)
	for e.streamedText(in.RunID) != "Once upon " {
		if time.Now().After(deadline) {
			t.Fatalf("the first chunks never reached the stream (have %q)", e.streamedText(in.RunID))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, outcome, err := e.Runs.RequestCancel(ctx, "alice", in.RunID); err != nil || outcome != run.CancelRequested {
		t.Fatalf("request cancel: %v %v", outcome, err)
	}
	if err := e.Stream.SignalCancel(ctx, in.RunID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the step did not stop on cancel")
	}

	r := e.run(in.RunID)
	if r.Status != run.StatusCancelled || r.ErrorType == nil || *r.ErrorType != "cancelled" {
		t.Fatalf("run after cancel: %+v", r)
	}
	// The cut-short turn is kept, marked partial.
	var content string
	var meta []byte
	if err := e.Pool.QueryRow(ctx, `SELECT content, extra_metadata FROM messages WHERE run_id = $1 AND role = 'assistant'`, in.RunID).Scan(&content, &meta); err != nil {
		t.Fatalf("partial assistant message: %v", err)
	}
	var m map[string]any
	_ = json.Unmarshal(meta, &m)
	if content != "Once upon " || m["partial"] != true {
		t.Errorf("partial message = %q %s", content, meta)
	}
	fin := runtest.Decode[events.RunFinished](t, e.WaitEvents(events.TypeRunFinished, 1)[0])
	if fin.Status != run.StatusCancelled {
		t.Errorf("run.finished = %+v", fin)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventInterrupt); n != 1 {
		t.Errorf("interrupt events = %d, want 1", n)
	}
	if n := e.Stream.Count(in.RunID, runstream.EventEnd); n != 1 || e.endStatus(in.RunID) != run.StatusCancelled {
		t.Errorf("end events = %d (status %q), want one, cancelled", n, e.endStatus(in.RunID))
	}
}
