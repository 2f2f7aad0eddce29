package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
)

func code(err error) string {
	if fe, ok := failure.As(err); ok {
		return fe.Code
	}
	if err == nil {
		return ""
	}
	return "uncoded: " + err.Error()
}

func TestSubmitToIdleThreadDispatchesAndEmitsFirstStep(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	in := f.MustSubmit(alice, th, "hello", "")
	if in.Status != "dispatched" || in.RunID == nil || in.StreamURL == nil || *in.StreamURL != "/api/agent/runs/"+*in.RunID+"/events" {
		t.Fatalf("want dispatched with a stream url, got %s", runtest.Str(in))
	}
	if in.QueuePosition != nil || in.RequestEventsURL != nil || in.QueuePolicy != "enqueue" {
		t.Errorf("dispatched intake must not carry queue fields: %s", runtest.Str(in))
	}
	r, err := f.Runs.Get(context.Background(), *in.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != run.StatusPending || r.RunType != run.TypeChat || r.Payload.ModelSpec != "fake:model" || r.InputMessageID == nil || *r.InputMessageID != in.MessageID {
		t.Errorf("run not created as expected: %+v", r)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE id = $1 AND delivery_status = 'dispatched' AND run_id = $2 AND transcript_seq IS NOT NULL`, in.MessageID, *in.RunID); n != 1 {
		t.Errorf("message not bound to the run and the transcript")
	}
	evs := f.WaitEvents(events.TypeStepReady, 1)
	got := runtest.Decode[events.StepReady](t, evs[0])
	if got.RunID != *in.RunID || got.StepNo != 1 || got.ThreadID != th {
		t.Errorf("step event: %+v", got)
	}
}

func TestQueueIsFIFOAndCompletionDispatchesTheNextHead(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	first := f.MustSubmit(alice, th, "one", "")
	second := f.MustSubmit(alice, th, "two", "")
	third := f.MustSubmit(alice, th, "three", "")
	if second.Status != "queued" || *second.QueuePosition != 1 || third.Status != "queued" || *third.QueuePosition != 2 {
		t.Fatalf("positions: %s %s", runtest.Str(second), runtest.Str(third))
	}
	if *second.RequestEventsURL != "/api/agent/requests/"+second.RequestID+"/events" || second.RunID != nil {
		t.Errorf("queued intake shape: %s", runtest.Str(second))
	}
	// The run is active: nothing else may be dispatched.
	if id, err := f.Queue.DispatchNext(context.Background(), "alice", "default-chatbot", th); err != nil || id != "" {
		t.Fatalf("dispatch while active: %q %v", id, err)
	}
	f.Complete(*first.RunID, "done one")
	id, err := f.Queue.DispatchNext(context.Background(), "alice", "default-chatbot", th)
	if err != nil || id == "" {
		t.Fatalf("next head not dispatched: %q %v", id, err)
	}
	req, err := f.Queue.GetRequest(context.Background(), "alice", second.RequestID)
	if err != nil || req.Status != "dispatched" || *req.DispatchedRunID != id {
		t.Fatalf("second request should run next: %+v %v", req, err)
	}
	req3, _ := f.Queue.GetRequest(context.Background(), "alice", third.RequestID)
	if req3.Status != "queued" || *req3.QueuePosition != 1 {
		t.Errorf("third request moves up: %+v", req3)
	}
	// Idempotent: a second dispatch does nothing.
	if again, err := f.Queue.DispatchNext(context.Background(), "alice", "default-chatbot", th); err != nil || again != "" {
		t.Errorf("double dispatch: %q %v", again, err)
	}
}

func TestRequestIDIsIdempotentAndScoped(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th1, th2 := f.Thread("alice"), f.Thread("alice")
	sub := queue.Submission{Subject: alice, Query: "hi", AgentSlug: "default-chatbot", ThreadID: th1, RequestID: "req-fixed-1"}
	a, err := f.Queue.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Queue.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if a.RequestID != b.RequestID || *a.RunID != *b.RunID || a.MessageID != b.MessageID {
		t.Errorf("replay differs: %s vs %s", runtest.Str(a), runtest.Str(b))
	}
	sub.ThreadID = th2
	if _, err := f.Queue.Submit(context.Background(), sub); code(err) != "request_id_conflict" {
		t.Errorf("same request_id on another thread: %v", err)
	}
	sub.ThreadID, sub.QueuePolicy = th1, "reject"
	if _, err := f.Queue.Submit(context.Background(), sub); code(err) != "request_id_conflict" {
		t.Errorf("same request_id with another policy: %v", err)
	}
	if n := f.Count(`SELECT count(*) FROM messages`); n != 1 {
		t.Errorf("replays and conflicts wrote messages: %d", n)
	}
}

func TestConcurrentSubmitsDispatchExactlyOne(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	const n = 16
	var wg sync.WaitGroup
	results := make([]queue.Intake, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = f.Submit(alice, th, fmt.Sprintf("m%d", i), "")
		}(i)
	}
	wg.Wait()
	dispatched, positions := 0, map[int]bool{}
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		if results[i].Status == "dispatched" {
			dispatched++
		} else {
			positions[*results[i].QueuePosition] = true
		}
	}
	if dispatched != 1 || len(positions) != n-1 {
		t.Fatalf("dispatched %d, distinct positions %d", dispatched, len(positions))
	}
	if c := f.Count(`SELECT count(*) FROM agent_runs WHERE status IN ('pending','running','cancel_requested')`); c != 1 {
		t.Errorf("active runs: %d", c)
	}
}

func TestRejectPolicyNeverWaits(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	f.MustSubmit(alice, th, "busy", "")
	rej := f.MustSubmit(alice, th, "now or never", "reject")
	if rej.Status != "rejected" || rej.RunID != nil || rej.QueuePosition != nil {
		t.Fatalf("want rejected: %s", runtest.Str(rej))
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE id = $1 AND delivery_status = 'rejected' AND transcript_seq IS NULL`, rej.MessageID); n != 1 {
		t.Errorf("rejected message not recorded as rejected")
	}
	if n := f.Count(`SELECT count(*) FROM agent_run_requests WHERE request_id = $1 AND status = 'rejected' AND input_payload = '{}'`, rej.RequestID); n != 1 {
		t.Errorf("rejected request not recorded")
	}
	// On an idle thread reject dispatches.
	th2 := f.Thread("alice")
	if in := f.MustSubmit(alice, th2, "free", "reject"); in.Status != "dispatched" {
		t.Errorf("reject on idle thread: %s", runtest.Str(in))
	}
}

func TestInterruptedRunBlocksNewMessagesWithoutWriting(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	in := f.MustSubmit(alice, th, "ask me", "")
	if _, _, err := f.Runs.Finish(context.Background(), *in.RunID, run.Finish{Status: run.StatusInterrupted, ErrorType: "ask_user_question_required"}); err != nil {
		t.Fatal(err)
	}
	before := f.Count(`SELECT count(*) FROM messages`)
	for _, p := range []string{"enqueue", "reject", "steer"} {
		_, err := f.Submit(alice, th, "more", p)
		if code(err) != "run_interrupted" {
			t.Errorf("%s: want run_interrupted, got %v", p, err)
		}
		var fe *failure.Error
		if errors.As(err, &fe) && fe.Details["run_id"] != *in.RunID {
			t.Errorf("details should name the blocking run: %v", fe.Details)
		}
	}
	if after := f.Count(`SELECT count(*) FROM messages`); after != before {
		t.Errorf("interrupted submit wrote messages: %d → %d", before, after)
	}
}

func TestFailedRunPausesBacklogUntilContinue(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	first := f.MustSubmit(alice, th, "one", "")
	second := f.MustSubmit(alice, th, "two", "")
	f.Fail(*first.RunID)
	if id, _ := f.Queue.DispatchNext(context.Background(), "alice", "default-chatbot", th); id != "" {
		t.Fatalf("failed run must pause the queue, but %s was dispatched", id)
	}
	snap, err := f.Queue.Snapshot(context.Background(), "alice", "", th)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Queue.Status != "paused" || !snap.Queue.CanContinue || *snap.Queue.PausedReason != "failed" || len(snap.Requests) != 1 || *snap.Requests[0].Content != "two" {
		t.Fatalf("snapshot: %+v", snap)
	}
	req, err := f.Queue.Continue(context.Background(), "alice", "", th)
	if err != nil || req.RequestID != second.RequestID || req.Status != "dispatched" {
		t.Fatalf("continue: %+v %v", req, err)
	}
	if _, err := f.Queue.Continue(context.Background(), "alice", "", th); code(err) != "run_active" {
		t.Errorf("continue while running: %v", err)
	}
	f.Complete(*req.DispatchedRunID, "ok")
	if _, err := f.Queue.Continue(context.Background(), "alice", "", th); code(err) != "queue_empty" {
		t.Errorf("continue on empty queue: %v", err)
	}
}

func TestSteerGoesFirstAndOnlyOnce(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	first := f.MustSubmit(alice, th, "long task", "")
	queued := f.MustSubmit(alice, th, "later", "")
	// A pending (not yet running) run is not steerable.
	if _, err := f.Submit(alice, th, "change course", "steer"); code(err) != "run_not_steerable" {
		t.Fatalf("steer on pending run: %v", err)
	}
	if c, err := f.Runs.Claim(context.Background(), *first.RunID, 1, "w", 60e9); err != nil || c.Outcome != run.Claimed {
		t.Fatal(c.Outcome, err)
	}
	steer := f.MustSubmit(alice, th, "change course", "steer")
	if steer.Status != "queued" || *steer.QueuePosition != 1 {
		t.Fatalf("steer position: %s", runtest.Str(steer))
	}
	if req, _ := f.Queue.GetRequest(context.Background(), "alice", queued.RequestID); *req.QueuePosition != 2 {
		t.Errorf("enqueued request should move behind the steer: %+v", req)
	}
	again := f.MustSubmit(alice, th, "again", "steer")
	if again.Status != "queued" || *again.QueuePosition != 2 {
		t.Errorf("second steer queues behind the first: %s", runtest.Str(again))
	}
	if req, _ := f.Queue.GetRequest(context.Background(), "alice", queued.RequestID); *req.QueuePosition != 3 {
		t.Errorf("enqueued request should stay behind both steers: %+v", req)
	}
	if n := f.Count(`SELECT count(*) FROM agent_run_requests WHERE status = 'queued' AND queue_policy = 'steer'`); n != 2 {
		t.Errorf("pending steers: %d", n)
	}
	if _, err := f.Queue.CancelRequest(context.Background(), "alice", steer.RequestID); code(err) != "steer_in_progress" {
		t.Errorf("cancel steer while active: %v", err)
	}
}

// Two steers sent at the same moment are both taken, and the run that
// follows the steered one carries both, in the order they were sent, ahead
// of the enqueued backlog; redelivering either changes nothing.
func TestSimultaneousSteersReachTheNextRunInOrder(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	ctx := context.Background()
	alice := f.User("alice")
	th := f.Thread("alice")
	first := f.MustSubmit(alice, th, "long task", "")
	backlog := f.MustSubmit(alice, th, "afterwards", "")
	c, err := f.Runs.Claim(ctx, *first.RunID, 1, "w", 60e9)
	if err != nil || c.Outcome != run.Claimed {
		t.Fatal(c.Outcome, err)
	}
	var wg sync.WaitGroup
	got := make([]queue.Intake, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = f.Queue.Submit(ctx, queue.Submission{Subject: alice, Query: fmt.Sprintf("steer %d", i), AgentSlug: "default-chatbot",
				ThreadID: th, QueuePolicy: "steer", RequestID: fmt.Sprintf("steer-%d", i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || got[i].Status != "queued" {
			t.Fatalf("steer %d: %s %v", i, runtest.Str(got[i]), err)
		}
	}
	if p0, p1 := *got[0].QueuePosition, *got[1].QueuePosition; p0+p1 != 3 {
		t.Fatalf("positions of two steers must be 1 and 2: %d %d", p0, p1)
	}
	// The thread lock serialised them: the one taken first is position 1.
	order := []string{got[0].RequestID, got[1].RequestID}
	if *got[1].QueuePosition == 1 {
		order[0], order[1] = order[1], order[0]
	}
	// The next claim of the run sees the steers waiting and ends it at its
	// boundary, as agent-step does.
	if err := f.Runs.Release(ctx, *first.RunID, run.Owner{Worker: "w", Attempt: c.Attempt}); err != nil {
		t.Fatal(err)
	}
	c, err = f.Runs.Claim(ctx, *first.RunID, 1, "w2", 60e9)
	if err != nil || c.Outcome != run.Claimed || !c.Steer {
		t.Fatalf("claim should report the waiting steers: %+v %v", c.Outcome, err)
	}
	if _, _, err := f.Runs.Finish(ctx, *first.RunID, run.Finish{Status: run.StatusCompleted, Owner: &run.Owner{Worker: "w2", Attempt: c.Attempt}}); err != nil {
		t.Fatal(err)
	}
	runID, err := f.Queue.DispatchNext(ctx, "alice", "default-chatbot", th)
	if err != nil || runID == "" {
		t.Fatalf("dispatch: %q %v", runID, err)
	}
	// Redelivered run.finished, and a redelivered submission: nothing new.
	if again, err := f.Queue.DispatchNext(ctx, "alice", "default-chatbot", th); err != nil || again != "" {
		t.Fatalf("second dispatch: %q %v", again, err)
	}
	replay, err := f.Queue.Submit(ctx, queue.Submission{Subject: alice, Query: "steer 1", AgentSlug: "default-chatbot", ThreadID: th,
		QueuePolicy: "steer", RequestID: "steer-1"})
	if err != nil || replay.Status != "dispatched" || *replay.RunID != runID {
		t.Fatalf("replayed steer: %s %v", runtest.Str(replay), err)
	}
	for _, id := range order {
		req, err := f.Queue.GetRequest(ctx, "alice", id)
		if err != nil || req.Status != "dispatched" || *req.DispatchedRunID != runID {
			t.Fatalf("steer %s not dispatched into %s: %+v %v", id, runID, req, err)
		}
	}
	r, err := f.Runs.Get(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestID != order[0] {
		t.Errorf("the run belongs to the first steer %s, not %s", order[0], r.RequestID)
	}
	tr, err := f.Runs.Transcript(ctx, r.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, e := range tr {
		if e.Role == "user" {
			users = append(users, e.Content)
		}
	}
	want := []string{"long task", "steer 0", "steer 1"}
	if order[0] == "steer-1" {
		want[1], want[2] = "steer 1", "steer 0"
	}
	if fmt.Sprint(users) != fmt.Sprint(want) {
		t.Errorf("transcript user messages %q, want %q", users, want)
	}
	if req, _ := f.Queue.GetRequest(ctx, "alice", backlog.RequestID); req.Status != "queued" || *req.QueuePosition != 1 {
		t.Errorf("the enqueued request waits for the steered run: %+v", req)
	}
	if n := f.Count(`SELECT count(*) FROM agent_runs WHERE conversation_thread_id = $1`, th); n != 2 {
		t.Errorf("runs on the thread: %d, want 2", n)
	}
}

func TestCancelQueuedRequest(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	first := f.MustSubmit(alice, th, "one", "")
	second := f.MustSubmit(alice, th, "two", "")
	req, err := f.Queue.CancelRequest(context.Background(), "alice", second.RequestID)
	if err != nil || req.Status != "cancelled" {
		t.Fatalf("cancel: %+v %v", req, err)
	}
	if n := f.Count(`SELECT count(*) FROM messages WHERE id = $1 AND delivery_status = 'cancelled'`, second.MessageID); n != 1 {
		t.Error("message not marked cancelled")
	}
	_, err = f.Queue.CancelRequest(context.Background(), "alice", first.RequestID)
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Code != "request_already_dispatched" || fe.Details["run_id"] != *first.RunID {
		t.Errorf("cancel of dispatched request: %v", err)
	}
}

func TestOtherUsersCannotSeeOrUseThreadsAndRequests(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice, bob := f.User("alice"), f.User("bob")
	th := f.Thread("alice")
	in := f.MustSubmit(alice, th, "mine", "")
	if _, err := f.Submit(bob, th, "yours?", ""); code(err) != "thread_not_found" {
		t.Errorf("bob on alice's thread: %v", err)
	}
	if _, err := f.Queue.GetRequest(context.Background(), "bob", in.RequestID); code(err) != "request_not_found" {
		t.Errorf("bob reads alice's request: %v", err)
	}
	if _, err := f.Queue.CancelRequest(context.Background(), "bob", in.RequestID); code(err) != "request_not_found" {
		t.Errorf("bob cancels alice's request: %v", err)
	}
	if _, err := f.Queue.Snapshot(context.Background(), "bob", "", th); code(err) != "thread_not_found" {
		t.Errorf("bob snapshots alice's thread: %v", err)
	}
	if _, err := f.Runs.GetForUser(context.Background(), "bob", *in.RunID); code(err) != "run_not_found" {
		t.Errorf("bob reads alice's run: %v", err)
	}
	if n := f.Count(`SELECT count(*) FROM messages`); n != 1 {
		t.Errorf("bob's attempts wrote rows: %d messages", n)
	}
}

func TestBadSubmissionsWriteNothing(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice := f.User("alice")
	th := f.Thread("alice")
	cases := []struct {
		sub  queue.Submission
		code string
	}{
		{queue.Submission{Subject: alice, Query: "  ", AgentSlug: "default-chatbot", ThreadID: th}, "empty_query"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "default-chatbot", ThreadID: "nope"}, "thread_not_found"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "no-such-agent", ThreadID: th}, "agent_not_found"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "default-chatbot", ThreadID: th, QueuePolicy: "guided"}, "queue_policy_not_implemented"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "default-chatbot", ThreadID: th, QueuePolicy: "yolo"}, "invalid_queue_policy"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "default-chatbot", ThreadID: th, RequestID: "bad id!"}, "invalid_request_id"},
		{queue.Submission{Subject: alice, Query: "x", AgentSlug: "default-chatbot", ThreadID: th, ModelSpec: "missing:m"}, "model_not_available"},
	}
	for _, c := range cases {
		if _, err := f.Queue.Submit(context.Background(), c.sub); code(err) != c.code {
			t.Errorf("want %s, got %v", c.code, err)
		}
	}
	if n := f.Count(`SELECT count(*) FROM messages`) + f.Count(`SELECT count(*) FROM agent_run_requests`) + f.Count(`SELECT count(*) FROM agent_runs`); n != 0 {
		t.Errorf("bad submissions left %d rows", n)
	}
}

// A request_id is the user's own idempotency key (issue 9): another user
// sending the same key gets a request of their own — not 409
// request_id_conflict, which told them the key was taken by someone — and
// each reads only their own request under it.
func TestRequestIDIsPerUser(t *testing.T) {
	t.Parallel()
	f := runtest.New(t)
	alice, bob := f.User("alice"), f.User("bob")
	tha, thb := f.Thread("alice"), f.Thread("bob")
	a, err := f.Queue.Submit(context.Background(), queue.Submission{Subject: alice, Query: "alice's", AgentSlug: "default-chatbot",
		ThreadID: tha, RequestID: "req-shared-1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Queue.Submit(context.Background(), queue.Submission{Subject: bob, Query: "bob's", AgentSlug: "default-chatbot",
		ThreadID: thb, RequestID: "req-shared-1"})
	if err != nil {
		t.Fatalf("bob's request with a key alice used: %v", err)
	}
	if b.RequestID != "req-shared-1" || b.RunID == nil || *b.RunID == *a.RunID || b.MessageID == a.MessageID || b.ThreadID != thb {
		t.Fatalf("bob got %s, alice %s", runtest.Str(b), runtest.Str(a))
	}
	ra, err := f.Queue.GetRequest(context.Background(), "alice", "req-shared-1")
	if err != nil || ra.ThreadID != tha {
		t.Fatalf("alice reads %+v, %v", ra, err)
	}
	rb, err := f.Queue.GetRequest(context.Background(), "bob", "req-shared-1")
	if err != nil || rb.ThreadID != thb {
		t.Fatalf("bob reads %+v, %v", rb, err)
	}
	// Each user's replay is still idempotent.
	again, err := f.Queue.Submit(context.Background(), queue.Submission{Subject: bob, Query: "bob's", AgentSlug: "default-chatbot",
		ThreadID: thb, RequestID: "req-shared-1"})
	if err != nil || *again.RunID != *b.RunID {
		t.Fatalf("bob's replay: %s, %v", runtest.Str(again), err)
	}
}
