package faas_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// pubsubFn is a function served by the real HTTP receiver whose permanent
// failures go to event_failures in a real database.
type pubsubFn struct {
	pool *pgxpool.Pool
	srv  *httptest.Server

	mu    sync.Mutex
	steps []stepCall
}

type stepCall struct {
	In          events.StepReady
	Traceparent string
}

func newPubSubFn(t *testing.T) *pubsubFn {
	t.Helper()
	pool, _ := pgtest.NewDatabase(t)
	f := &pubsubFn{pool: pool}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	r := faas.NewRouter("test-fn", outbox.FailureStore{Pool: pool}, log)
	faas.On(r, func(ctx context.Context, in events.StepReady) error {
		f.mu.Lock()
		f.steps = append(f.steps, stepCall{in, events.TraceparentFrom(ctx)})
		f.mu.Unlock()
		switch {
		case strings.HasPrefix(in.RunID, "run_perm"):
			return faas.Permanent(errors.New("step refused"))
		case strings.HasPrefix(in.RunID, "run_retry"):
			return errTransient
		}
		return nil
	})
	f.srv = httptest.NewServer(faas.NewHTTPReceiver(r))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *pubsubFn) takeSteps() []stepCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.steps
	f.steps = nil
	return out
}

type failureRow struct {
	EventID, Type, Source, Handler, Error string
}

func (f *pubsubFn) failures(t *testing.T) []failureRow {
	t.Helper()
	rows, err := f.pool.Query(t.Context(), `SELECT event_id, type, source, handler, error FROM event_failures ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []failureRow
	for rows.Next() {
		var r failureRow
		if err := rows.Scan(&r.EventID, &r.Type, &r.Source, &r.Handler, &r.Error); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// post sends body with headers and returns the status and response body.
func (f *pubsubFn) post(t *testing.T, headers map[string]string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pushHeaders are what a Pub/Sub push subscription sends: no CloudEvents
// headers.
var pushHeaders = map[string]string{"Content-Type": "application/json", "User-Agent": "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)"}

// eventarcFixture returns the headers and body of the Eventarc delivery fixture.
func eventarcFixture(t *testing.T) (map[string]string, []byte) {
	t.Helper()
	var fx struct {
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	}
	if err := json.Unmarshal(readFixture(t, "eventarc_messagepublished.json"), &fx); err != nil {
		t.Fatal(err)
	}
	return fx.Headers, fx.Body
}

// asEventarc wraps a push body in the binary-mode headers Eventarc sends.
func asEventarc(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var env struct {
		Message struct {
			MessageID string `json:"messageId"`
		} `json:"message"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"Content-Type":   "application/json",
		"Ce-Specversion": "1.0",
		"Ce-Id":          env.Message.MessageID,
		"Ce-Source":      "//pubsub.googleapis.com/projects/yuxi-prod/topics/yuxi-events",
		"Ce-Type":        faas.PubSubMessagePublished,
		"Ce-Time":        "2026-01-08T09:30:01.456Z",
	}
}

// pushOf builds a push envelope whose data is the structured event doc.
func pushOf(t *testing.T, messageID string, doc map[string]any) []byte {
	t.Helper()
	ev, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{
		"message": map[string]any{
			"data":        base64.StdEncoding.EncodeToString(ev),
			"messageId":   messageID,
			"publishTime": "2026-01-08T09:30:01.456Z",
		},
		"subscription": "projects/yuxi-prod/subscriptions/agent-step-push",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stepDoc(id, runID string) map[string]any {
	return map[string]any{
		"specversion": "1.0", "id": id, "source": "/yuxi/tool-invoke", "type": events.TypeStepReady,
		"datacontenttype": "application/json",
		"data":            map[string]any{"run_id": runID, "thread_id": "thread_42", "step_no": 1},
	}
}

func TestPubSubDeliveriesRouteTheYuxiEvent(t *testing.T) {
	f := newPubSubFn(t)
	eaHeaders, eaBody := eventarcFixture(t)
	binary := readFixture(t, "pubsub_push_binary.json")
	cases := []struct {
		name    string
		headers map[string]string
		body    []byte
		want    stepCall
	}{
		{"eventarc messagePublished, structured event in data", eaHeaders, eaBody, stepCall{
			events.StepReady{RunID: "run_ok_structured", ThreadID: "thread_42", StepNo: 2},
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"push envelope, structured event in data", pushHeaders, eaBody, stepCall{
			events.StepReady{RunID: "run_ok_structured", ThreadID: "thread_42", StepNo: 2},
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"push envelope, ce- attributes", pushHeaders, binary, stepCall{
			events.StepReady{RunID: "run_ok_binary", ThreadID: "thread_42", StepNo: 3},
			"00-4bf92f3577b34da6a3ce929d0e0e4736-1c2d3e4f5a6b7c8d-01"}},
		{"eventarc messagePublished, ce- attributes", asEventarc(t, binary), binary, stepCall{
			events.StepReady{RunID: "run_ok_binary", ThreadID: "thread_42", StepNo: 3},
			"00-4bf92f3577b34da6a3ce929d0e0e4736-1c2d3e4f5a6b7c8d-01"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.post(t, tc.headers, tc.body)
			if status != http.StatusOK || body != "" {
				t.Fatalf("answer = %d %q, want 200 with an empty body", status, body)
			}
			if got := f.takeSteps(); !slices.Equal(got, []stepCall{tc.want}) {
				t.Errorf("handler calls = %+v, want %+v", got, tc.want)
			}
		})
	}
	if rows := f.failures(t); len(rows) != 0 {
		t.Errorf("event_failures = %+v, want none", rows)
	}
}

func TestPubSubUnroutableIsRecordedAndAcknowledged(t *testing.T) {
	f := newPubSubFn(t)
	unroutable := readFixture(t, "pubsub_push_unroutable.json")

	// Pub/Sub push and Eventarc: 2xx after recording, or it is redelivered forever.
	for _, headers := range []map[string]string{pushHeaders, asEventarc(t, unroutable)} {
		if status, body := f.post(t, headers, unroutable); status != http.StatusOK || body != "" {
			t.Fatalf("answer = %d %q, want 200 with an empty body", status, body)
		}
	}
	// A CloudEvents broker (Knative) delivering the same type: 422, not retried.
	ceHeaders := map[string]string{
		"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Id": "ev-knative-unroutable",
		"Ce-Source": "/yuxi/tool-invoke", "Ce-Type": "io.yuxi.thread.archived.v1",
	}
	status, body := f.post(t, ceHeaders, []byte(`{"thread_id":"thread_42"}`))
	var er errorResponse
	if err := json.Unmarshal([]byte(body), &er); err != nil || status != http.StatusUnprocessableEntity || er.Error.Code != faas.CodeNoHandler {
		t.Fatalf("knative answer = %d %s, want 422 %s", status, body, faas.CodeNoHandler)
	}
	if got := f.takeSteps(); len(got) != 0 {
		t.Errorf("handler ran: %+v", got)
	}

	rows := f.failures(t)
	if len(rows) != 2 {
		t.Fatalf("event_failures = %+v, want the Pub/Sub event once (redelivery is idempotent) and the Knative one", rows)
	}
	want := []failureRow{
		{EventID: "7e8f9a0b1c2d43e5f60718293a4b5c6d", Type: "io.yuxi.thread.archived.v1", Source: "/yuxi/intake", Handler: "test-fn"},
		{EventID: "ev-knative-unroutable", Type: "io.yuxi.thread.archived.v1", Source: "/yuxi/tool-invoke", Handler: "test-fn"},
	}
	for i, r := range rows {
		if !strings.Contains(r.Error, `no handler for event type "io.yuxi.thread.archived.v1"`) {
			t.Errorf("row %d error = %q", i, r.Error)
		}
		r.Error = ""
		if r != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, r, want[i])
		}
	}
}

func TestPubSubBadMessagesAreRecordedAndAcknowledged(t *testing.T) {
	f := newPubSubFn(t)
	cases := []struct {
		name      string
		headers   map[string]string
		body      []byte
		status    int
		handled   []string
		eventID   string // the failure row expected, "" for none
		eventType string
		errorHas  string
	}{
		{name: "push of a message that is not a CloudEvent", headers: pushHeaders, body: readFixture(t, "pubsub_push_not_cloudevent.json"),
			status: 200, eventID: "11873509146521888", eventType: faas.PubSubMessagePublished, errorHas: "neither a structured CloudEvent nor described by ce- attributes"},
		{name: "push whose data is not base64", headers: pushHeaders,
			body:   []byte(`{"message":{"data":"%%%","messageId":"m-badb64"},"subscription":"projects/p/subscriptions/s"}`),
			status: 200, eventID: "m-badb64", eventType: faas.PubSubMessagePublished, errorHas: "pub/sub envelope"},
		{name: "push of an invalid CloudEvent", headers: pushHeaders, body: pushOf(t, "m-noid", map[string]any{"specversion": "1.0", "type": events.TypeStepReady, "source": "/x"}),
			status: 200, eventID: "m-noid", eventType: faas.PubSubMessagePublished, errorHas: "invalid CloudEvent"},
		{name: "push, data fails the schema", headers: pushHeaders,
			body: pushOf(t, "m-schema", map[string]any{"specversion": "1.0", "id": "ev-schema", "source": "/x", "type": events.TypeStepReady,
				"datacontenttype": "application/json", "data": map[string]any{"run_id": "r"}}),
			status: 200, eventID: "ev-schema", eventType: events.TypeStepReady, errorHas: "schema"},
		{name: "push, handler fails permanently", headers: pushHeaders, body: pushOf(t, "m-perm", stepDoc("ev-perm", "run_perm")),
			status: 200, handled: []string{"run_perm"}, eventID: "ev-perm", eventType: events.TypeStepReady, errorHas: "step refused"},
		{name: "push, transient failure is redelivered", headers: pushHeaders, body: pushOf(t, "m-retry", stepDoc("ev-retry", "run_retry")),
			status: 503, handled: []string{"run_retry"}},
		{name: "eventarc, handler fails permanently", headers: map[string]string{
			"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Id": "m-perm2", "Ce-Type": faas.PubSubMessagePublished,
			"Ce-Source": "//pubsub.googleapis.com/projects/p/topics/t"}, body: pushOf(t, "m-perm2", stepDoc("ev-perm2", "run_perm2")),
			status: 200, handled: []string{"run_perm2"}, eventID: "ev-perm2", eventType: events.TypeStepReady, errorHas: "step refused"},
		{name: "JSON that is no push envelope stays a 400", headers: pushHeaders, body: []byte(`{"hello":"world"}`), status: 400},
		{name: "push without a message id is no valid event: 400", headers: pushHeaders,
			body: []byte(`{"message":{"data":"e30="},"subscription":"projects/p/subscriptions/s"}`), status: 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.failures(t))
			status, body := f.post(t, tc.headers, tc.body)
			if status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", status, tc.status, body)
			}
			if status == http.StatusOK && body != "" {
				t.Errorf("2xx body = %q, want empty", body)
			}
			var ran []string
			for _, s := range f.takeSteps() {
				ran = append(ran, s.In.RunID)
			}
			if !slices.Equal(ran, tc.handled) {
				t.Errorf("handler calls = %v, want %v", ran, tc.handled)
			}
			rows := f.failures(t)[before:]
			if tc.eventID == "" {
				if len(rows) != 0 {
					t.Errorf("recorded %+v, want nothing", rows)
				}
				return
			}
			if len(rows) != 1 || rows[0].EventID != tc.eventID || rows[0].Type != tc.eventType || !strings.Contains(rows[0].Error, tc.errorHas) {
				t.Errorf("recorded %+v, want one row for %s (%s) mentioning %q", rows, tc.eventID, tc.eventType, tc.errorHas)
			}
		})
	}
}

func TestPubSubAttributesBecomeExtensions(t *testing.T) {
	t.Parallel()
	ev, err := faas.EventFromPubSubEnvelope(readFixture(t, "pubsub_push_binary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "5b6c7d8e9f0a41b2c3d4e5f60718293a" || ev.Type() != events.TypeStepReady || ev.Source() != "/yuxi/agent-step" ||
		ev.Time().Format("2006-01-02T15:04:05Z07:00") != "2026-01-08T09:31:00Z" || ev.DataContentType() != "application/json" {
		t.Errorf("context = %s", ev.Context)
	}
	ext := ev.Extensions()
	for k, v := range map[string]string{"runid": "run_ok_binary", "threadid": "thread_42", "tenant": "acme",
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1c2d3e4f5a6b7c8d-01"} {
		if ext[k] != v {
			t.Errorf("extension %s = %v, want %q", k, ext[k], v)
		}
	}
	if _, ok := ext["googclient_schemaencoding"]; ok || len(ext) != 4 {
		t.Errorf("extensions = %v: an attribute name CloudEvents cannot carry must be left out", ext)
	}

	// Structured mode: the event's own extensions win over message attributes.
	_, body := eventarcFixture(t)
	ev, err = faas.EventFromPubSubEnvelope(body)
	if err != nil {
		t.Fatal(err)
	}
	ext = ev.Extensions()
	if ev.ID() != "0f1e2d3c4b5a46978899aabbccddeeff" || ext["origin"] != "outbox-relay" || ext["runid"] != "run_ok_structured" {
		t.Errorf("event = %s", ev)
	}
	if _, ok := ext["content-type"]; ok {
		t.Errorf("content-type became an extension: %v", ext)
	}
}

// The functions-framework adapter (Cloud Run functions) goes through
// Router.Deliver as well: a messagePublished event is unwrapped there.
func TestPubSubUnderFunctionsFramework(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	_, body := eventarcFixture(t)
	outer := stepEvent(t, "11873509146521534", "unused")
	outer.SetType(faas.PubSubMessagePublished)
	outer.SetSource("//pubsub.googleapis.com/projects/yuxi-prod/topics/yuxi-events")
	if err := outer.SetData("application/json", body); err != nil {
		t.Fatal(err)
	}
	if err := faas.CloudEventFunction(fn.router)(t.Context(), outer); err != nil {
		t.Fatal(err)
	}
	if got := fn.called(); !slices.Equal(got, []string{"run_ok_structured"}) {
		t.Errorf("handler calls = %v", got)
	}
}

// When the failure cannot be recorded (the database is down), Pub/Sub is asked
// to deliver again rather than told the message is done.
func TestPubSubUnrecordedFailureIsRedelivered(t *testing.T) {
	f := newPubSubFn(t)
	f.pool.Close()
	unroutable := readFixture(t, "pubsub_push_unroutable.json")
	for _, headers := range []map[string]string{pushHeaders, asEventarc(t, unroutable)} {
		if status, body := f.post(t, headers, unroutable); status != http.StatusServiceUnavailable {
			t.Errorf("answer = %d %s, want 503", status, body)
		}
	}
	// The same under functions-framework: an error, which it answers with 500.
	r := faas.NewRouter("test-fn", outbox.FailureStore{Pool: f.pool}, nil)
	outer := stepEvent(t, "11873509146521777", "unused")
	outer.SetType(faas.PubSubMessagePublished)
	if err := outer.SetData("application/json", unroutable); err != nil {
		t.Fatal(err)
	}
	if err := faas.CloudEventFunction(r)(t.Context(), outer); err == nil {
		t.Error("functions-framework function returned nil for an unrecorded failure")
	}
}

// A Cloud Scheduler job with a Pub/Sub target publishes fixed attributes: only
// ce-type names the event, the id comes from the message id.
func TestPubSubCloudSchedulerTick(t *testing.T) {
	t.Parallel()
	tick := readFixture(t, "cloud_scheduler_pubsub.json")
	ev, err := faas.EventFromPubSubEnvelope(tick)
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID() != "11873509146529042" || ev.Type() != events.TypeSweepRequested ||
		ev.Source() != "//pubsub.googleapis.com/projects/yuxi-prod/subscriptions/eventarc-europe-west1-dispatcher-sweep-sub-204" ||
		!ev.Time().Equal(time.Date(2026, 1, 8, 10, 0, 0, 311e6, time.UTC)) {
		t.Errorf("event = %s", ev)
	}
	fn := newScripted(t)
	srv := httptest.NewServer(faas.NewHTTPReceiver(fn.router))
	defer srv.Close()
	for _, headers := range []map[string]string{pushHeaders, asEventarc(t, tick)} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(tick))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d", resp.StatusCode)
		}
	}
	if got := fn.called(); !slices.Equal(got, []string{"sweep:schedule", "sweep:schedule"}) {
		t.Errorf("handler calls = %v", got)
	}
	if ids := fn.rec.ids(); len(ids) != 0 {
		t.Errorf("recorded %v", ids)
	}
}
