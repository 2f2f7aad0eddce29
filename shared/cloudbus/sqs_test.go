package cloudbus_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// Events go to the queues routed to their type (several queues: fan-out;
// "*" for the rest), ten per SendMessageBatch; FIFO queues get the thread as
// message group and a deduplication id; a failed entry is retried alone and
// one refused as the sender's fault is not.
func TestSQSRelayRoutesBatchesAndRetriesFailedEntries(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	fake := newAWSFake(t)
	stepQ := fake.URL + "/111122223333/yuxi-agent-step.fifo"
	auditQ := fake.URL + "/111122223333/yuxi-audit"
	restQ := fake.URL + "/111122223333/yuxi-dispatcher"
	routes, err := cloudbus.ParseRoutes(events.TypeStepReady + "=" + stepQ + "," + events.TypeStepReady + "=" + auditQ + ",*=" + restQ)
	if err != nil {
		t.Fatal(err)
	}
	fake.FailEntryOnce(`"run_sqs04"`, "ServiceUnavailable")
	fake.FailEntryOnce(`"reason":"bad"`, "InvalidMessageContents")
	pub := cloudbus.NewSQS(fake.SQS(), cloudbus.SQSConfig{Queues: routes})
	ob := startRelay(t, pool, pub)
	ps := append(steps(12, "run_sqs"), events.SweepRequested{Reason: "ok"}, events.SweepRequested{Reason: "bad"})
	emit(t, pool, ob, ps...)
	waitPublished(t, pool, 14)

	if n := fake.BadSignatures(); n != 0 {
		t.Fatalf("%d requests failed SigV4 verification", n)
	}
	perQueue := map[string]map[string]int{}
	for _, b := range fake.Sends() {
		if perQueue[b.QueueUrl] == nil {
			perQueue[b.QueueUrl] = map[string]int{}
		}
		for _, e := range b.Entries {
			ev := decodeStructured(t, e.MessageBody)
			key := ev.Type()
			if ev.Type() == events.TypeStepReady {
				var in events.StepReady
				_ = json.Unmarshal(ev.Data(), &in)
				key = in.RunID
				if b.QueueUrl == stepQ {
					sum := sha256.Sum256([]byte(ev.Source() + "\x00" + ev.ID()))
					if e.MessageGroupId != "thread_run_sqs" || e.MessageDeduplicationId != hex.EncodeToString(sum[:]) {
						t.Errorf("FIFO entry: group %q dedupe %q", e.MessageGroupId, e.MessageDeduplicationId)
					}
				}
			}
			perQueue[b.QueueUrl][key]++
		}
	}
	if got := len(perQueue[stepQ]); got != 12 {
		t.Errorf("step queue got %d distinct runs, want 12", got)
	}
	if got := len(perQueue[auditQ]); got != 12 {
		t.Errorf("fan-out queue got %d distinct runs, want 12", got)
	}
	// run_sqs04 failed once on whichever queue saw it first, then went again.
	if n := perQueue[stepQ]["run_sqs04"] + perQueue[auditQ]["run_sqs04"]; n < 3 {
		t.Errorf("run_sqs04 sent %d times across both queues, want a retry", n)
	}
	if n := perQueue[restQ][events.TypeSweepRequested]; n != 2 {
		t.Errorf("sweep requests sent to the catch-all queue: %d, want 2 (the refused one is not retried)", n)
	}
}

func TestSQSUnroutedTypeIsPermanent(t *testing.T) {
	t.Parallel()
	fake := newAWSFake(t)
	routes, _ := cloudbus.ParseRoutes(events.TypeStepReady + "=" + fake.URL + "/q")
	pub := cloudbus.NewSQS(fake.SQS(), cloudbus.SQSConfig{Queues: routes})
	ev, err := events.New(events.Source("test"), events.NewID(), events.SweepRequested{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(context.Background(), ev); err == nil || !isPermanent(err) {
		t.Fatalf("unrouted type: %v", err)
	}
}

func TestParseRoutes(t *testing.T) {
	r, err := cloudbus.ParseRoutes(" a=q1, a=q2\n*=q3 ")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.For("a"); len(got) != 2 || got[1] != "q2" {
		t.Errorf("a: %v", got)
	}
	if got := r.For("b"); len(got) != 1 || got[0] != "q3" {
		t.Errorf("b: %v", got)
	}
	for _, bad := range []string{"", "a", "=q", "a="} {
		if _, err := cloudbus.ParseRoutes(bad); err == nil {
			t.Errorf("ParseRoutes(%q) accepted", bad)
		}
	}
}
