package cloudbus_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus/cloudbustest"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// One commit of 25 events leaves in PutEvents requests of at most 10
// entries; the entries EventBridge fails are retried alone until accepted;
// an entry refused as malformed is acknowledged (not retried) and logged.
func TestEventBridgeRelayBatchesAndRetriesFailedEntries(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	fake := newAWSFake(t)
	fake.FailEntryOnce(`"run_eb03"`, "ThrottlingException")
	fake.FailEntryOnce(`"run_eb17"`, "InternalFailure")
	fake.FailEntryOnce(`"run_eb21"`, "MalformedDetail")
	pub := cloudbus.NewEventBridge(fake.EventBridge(), cloudbus.EventBridgeConfig{Bus: "yuxi-test"})
	ob := startRelay(t, pool, pub)
	emit(t, pool, ob, steps(25, "run_eb")...)
	waitPublished(t, pool, 25)

	if n := fake.BadSignatures(); n != 0 {
		t.Fatalf("%d requests failed SigV4 verification", n)
	}
	puts := fake.Puts()
	seen := map[string]int{}
	entries := 0
	for _, req := range puts {
		if len(req) > 10 {
			t.Fatalf("PutEvents with %d entries", len(req))
		}
		for _, e := range req {
			entries++
			if e.Source != cloudbus.DefaultEventBridgeSource || e.EventBusName != "yuxi-test" || e.DetailType != events.TypeStepReady {
				t.Errorf("entry envelope: %+v", e)
			}
			ev := decodeStructured(t, e.Detail)
			var in events.StepReady
			if err := json.Unmarshal(ev.Data(), &in); err != nil {
				t.Fatal(err)
			}
			if ev.Type() != e.DetailType || ev.Extensions()[events.ExtThreadID] != "thread_run_eb" {
				t.Errorf("detail: %s", e.Detail)
			}
			seen[in.RunID]++
		}
	}
	if len(seen) != 25 {
		t.Fatalf("distinct events put: %d, want 25", len(seen))
	}
	for run, n := range seen {
		want := 1
		if run == "run_eb03" || run == "run_eb17" {
			want = 2 // failed once, then accepted
		}
		if n != want {
			t.Errorf("%s put %d times, want %d", run, n, want)
		}
	}
	if len(puts) < 3 || len(puts) > 8 {
		t.Errorf("%d PutEvents requests for %d entries: batching is off", len(puts), entries)
	}
}

// While EventBridge is unreachable the rows stay unpublished with the error
// noted; the sweep publishes them once it is back.
func TestEventBridgeOutageIsLeftToTheSweep(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	fake := newAWSFake(t)
	fake.SetDown(true)
	pub := cloudbus.NewEventBridge(fake.EventBridge(), cloudbus.EventBridgeConfig{Bus: "yuxi-test"})
	ob := startRelay(t, pool, pub)
	emit(t, pool, ob, steps(3, "run_down")...)
	ob.Relay.Wait()
	if _, done := counts(t, pool); done != 0 {
		t.Fatal("rows acknowledged while EventBridge was down")
	}
	var withError int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE last_error LIKE '%InternalFailure%'`).Scan(&withError); err != nil || withError != 3 {
		t.Fatalf("rows with the error noted: %d %v", withError, err)
	}
	fake.SetDown(false)
	expireClaims(t, pool)
	if n, err := ob.Relay.Sweep(context.Background()); err != nil || n != 3 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	waitPublished(t, pool, 3)
}

// What the relay puts on the bus is what a consumer's Lambda decodes, both
// when the rule invokes it directly and through an SQS queue.
func TestEventBridgeEntriesRoundTripIntoTheConsumer(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	fake := newAWSFake(t)
	pub := cloudbus.NewEventBridge(fake.EventBridge(), cloudbus.EventBridgeConfig{Bus: "yuxi-test"})
	ob := startRelay(t, pool, pub)
	emit(t, pool, ob, steps(2, "run_rt")...)
	waitPublished(t, pool, 2)
	sink := newStepSink()
	handler := faas.LambdaHandler(sink.r)
	var bodies []string
	for _, req := range fake.Puts() {
		for _, e := range req {
			// The event EventBridge delivers to a target for this entry.
			env, _ := json.Marshal(map[string]any{
				"version": "0", "id": "0d4d1d56-1f7b-4c5e-9e0a-" + strings.Repeat("a", 12), "detail-type": e.DetailType,
				"source": e.Source, "account": "111122223333", "time": "2026-12-01T10:00:00Z", "region": cloudbustest.Region,
				"resources": []string{}, "detail": json.RawMessage(e.Detail),
			})
			bodies = append(bodies, string(env))
		}
	}
	if _, err := handler(context.Background(), json.RawMessage(bodies[0])); err != nil {
		t.Fatal(err)
	}
	sqsEvent, _ := json.Marshal(map[string]any{"Records": []map[string]any{{
		"messageId": "m1", "body": bodies[1], "eventSource": "aws:sqs",
		"eventSourceARN": "arn:aws:sqs:eu-west-1:111122223333:yuxi-agent-step", "attributes": map[string]string{},
	}}})
	out, err := handler(context.Background(), sqsEvent)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(out); !strings.Contains(string(b), `"batchItemFailures":[]`) {
		t.Fatalf("SQS answer: %s", b)
	}
	if sink.runs["run_rt00"] != 1 || sink.runs["run_rt01"] != 1 {
		t.Fatalf("consumer got %v", sink.runs)
	}
	for run, tp := range sink.tps {
		if !strings.HasPrefix(tp, "00-") {
			t.Errorf("%s lost its traceparent: %q", run, tp)
		}
	}
}
