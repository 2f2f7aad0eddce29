package faas_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// cloudSchedulerRequest is what a Cloud Scheduler job with an HTTP target
// sends (its body is whatever the job was given).
func cloudSchedulerRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"job":"nightly"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Google-Cloud-Scheduler")
	req.Header.Set("X-CloudScheduler", "true")
	req.Header.Set("X-CloudScheduler-JobName", "yuxi-evaluation-nightly")
	req.Header.Set("X-CloudScheduler-ScheduleTime", "2026-12-01T02:00:00.123Z")
	return req
}

func tickData(t *testing.T, ev cloudevents.Event) map[string]string {
	t.Helper()
	if ev.Type() != faas.TypeEvaluationTick {
		t.Fatalf("type %q, want the tick", ev.Type())
	}
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	var d map[string]string
	if err := json.Unmarshal(ev.Data(), &d); err != nil {
		t.Fatal(err)
	}
	for k := range d {
		if k != "time" && k != "reason" {
			t.Errorf("tick data has %q, which the tick schema does not allow", k)
		}
	}
	return d
}

func TestSchedulerTicksDecodeIntoTheTickEvent(t *testing.T) {
	t.Parallel()
	// An EventBridge scheduled rule's event.
	ev, err := faas.FromEventBridgeJSON(readFixture(t, "eventbridge_scheduled_rule.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := tickData(t, ev)
	if ev.ID() != "89d1a02d-5ec7-412e-82f5-13505f849b41" || ev.Subject() != "yuxi-evaluation-nightly" ||
		d["time"] != "2026-12-01T02:00:00Z" || d["reason"] != "schedule yuxi-evaluation-nightly" {
		t.Errorf("scheduled rule tick: id %s subject %s data %v", ev.ID(), ev.Subject(), d)
	}
	// A Cloud Scheduler HTTP target request: the same firing (retries keep
	// its schedule time) is the same event id.
	ev, status, err := faas.ReadHTTPEvent(cloudSchedulerRequest(t, "http://fn/"), faas.MaxEventBytes)
	if err != nil {
		t.Fatalf("status %d: %v", status, err)
	}
	d = tickData(t, ev)
	again, _, _ := faas.ReadHTTPEvent(cloudSchedulerRequest(t, "http://fn/"), faas.MaxEventBytes)
	if ev.ID() != again.ID() || ev.Subject() != "yuxi-evaluation-nightly" || d["time"] != "2026-12-01T02:00:00Z" {
		t.Errorf("cloud scheduler tick: id %s/%s subject %s data %v", ev.ID(), again.ID(), ev.Subject(), d)
	}
	// EventBridge Scheduler's Lambda target Input, templated as a structured
	// CloudEvent (terraform/aws), after the context attributes are filled in.
	var in cloudevents.Event
	if err := json.Unmarshal(readFixture(t, "eventbridge_scheduler_input.json"), &in); err != nil {
		t.Fatal(err)
	}
	if d := tickData(t, in); d["time"] != "2026-12-01T02:00:00Z" {
		t.Errorf("scheduler input: %v", d)
	}
}

// A tick nobody handles is recorded with its type named, then answered the
// way each transport treats as final: success for a direct EventBridge
// invocation, left out of an SQS batch's failures, 422 over HTTP.
func TestUnhandledTicksAreRecordedAndFinal(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	h := faas.LambdaHandler(fn.router)
	rule := readFixture(t, "eventbridge_scheduled_rule.json")
	out, err := h(t.Context(), json.RawMessage(rule))
	if err != nil {
		t.Fatalf("direct: %v", err)
	}
	if rep, ok := out.(faas.LambdaReport); !ok || rep.Outcome == "retry" {
		t.Fatalf("direct: %#v", out)
	}
	body, _ := json.Marshal(string(bytes.Replace(rule, []byte("89d1a02d"), []byte("99d1a02d"), 1)))
	sqs := `{"Records":[{"messageId":"m-tick","body":` + string(body) + `,"eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:eu-west-1:123456789012:yuxi-evaluate","attributes":{}}]}`
	out, err = h(t.Context(), json.RawMessage(sqs))
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(t, out); len(got) != 0 {
		t.Errorf("batchItemFailures = %v, want none (recorded, final)", got)
	}
	srv := httptest.NewServer(faas.NewHTTPReceiver(fn.router))
	defer srv.Close()
	resp, err := http.DefaultClient.Do(cloudSchedulerRequest(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("cloud scheduler tick answered %d, want 422", resp.StatusCode)
	}
	fn.rec.mu.Lock()
	defer fn.rec.mu.Unlock()
	if len(fn.rec.got) != 3 {
		t.Fatalf("recorded %d failures, want 3: %+v", len(fn.rec.got), fn.rec.got)
	}
	for _, g := range fn.rec.got {
		if g.Type != faas.TypeEvaluationTick || !faas.IsNoHandler(g.Cause) {
			t.Errorf("recorded %+v", g)
		}
	}
}
