package faas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Message ids in testdata/sqs_eventbridge.json.
const (
	msgOK          = "2e1424d4-f796-459a-8184-9c92662be6da" // EventBridge, CloudEvent in detail, run_ok
	msgRetry       = "059f36b4-87a3-44ab-83d2-661975830a7d" // EventBridge, CloudEvent in detail, run_retry
	msgPerm        = "d9a7c2e1-4b3f-4a5e-9c8d-7e6f5a4b3c2d" // EventBridge, CloudEvent in detail, run_perm
	msgPlain       = "5f3a2b1c-0d9e-4f8a-b7c6-d5e4f3a2b1c0" // EventBridge, plain detail, run_ok_plain
	msgDirectRetry = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d" // structured CloudEvent body, run_retry_direct
	msgBadSchema   = "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e" // EventBridge, CloudEvent whose data fails the schema
	msgGarbage     = "c3d4e5f6-a7b8-4c9d-8e1f-2a3b4c5d6e7f" // body is not JSON
)

func failedIDs(t *testing.T, out any) []string {
	t.Helper()
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		t.Fatalf("result is %T, want events.SQSEventResponse", out)
	}
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestLambdaSQSPartialBatch(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	out, err := faas.LambdaHandler(fn.router)(t.Context(), readFixture(t, "sqs_eventbridge.json"))
	if err != nil {
		t.Fatalf("handler error %v: an SQS batch must not fail as a whole", err)
	}
	if got, want := failedIDs(t, out), []string{msgRetry, msgDirectRetry}; !slices.Equal(got, want) {
		t.Errorf("batchItemFailures = %v, want exactly the retried messages %v", got, want)
	}
	if got, want := fn.called(), []string{"run_ok", "run_retry", "run_perm", "run_ok_plain", "run_retry_direct"}; !slices.Equal(got, want) {
		t.Errorf("handler calls = %v, want %v", got, want)
	}
	// Permanent failures and malformed messages are acknowledged and recorded:
	// the CloudEvent id where there is one, else the SQS message id.
	want := []string{"2c3d4e5f6a7b40718293a4b5c6d7e8f2", "4e5f6a7b8c9d40718293a4b5c6d7e8f4", msgGarbage}
	slices.Sort(want)
	if got := fn.rec.ids(); !slices.Equal(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}

	// The JSON Lambda sends back is the partial batch response shape.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"batchItemFailures":[{"itemIdentifier":"` + msgRetry + `"},{"itemIdentifier":"` + msgDirectRetry + `"}]}`; string(b) != want {
		t.Errorf("response JSON = %s, want %s", b, want)
	}
}

func TestLambdaSQSAllAcked(t *testing.T) {
	t.Parallel()
	var sqs events.SQSEvent
	if err := json.Unmarshal(readFixture(t, "sqs_eventbridge.json"), &sqs); err != nil {
		t.Fatal(err)
	}
	sqs.Records = sqs.Records[:1]
	payload, _ := json.Marshal(sqs)
	out, err := faas.LambdaHandler(newScripted(t).router)(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	if string(b) != `{"batchItemFailures":[]}` {
		t.Errorf("response = %s", b)
	}
}

// On a FIFO queue a retried message holds back the rest of the batch, so a
// message group keeps its order.
func TestLambdaSQSFIFOStopsAtFirstRetry(t *testing.T) {
	t.Parallel()
	var sqs events.SQSEvent
	if err := json.Unmarshal(readFixture(t, "sqs_eventbridge.json"), &sqs); err != nil {
		t.Fatal(err)
	}
	sqs.Records = sqs.Records[:4] // ok, retry, perm, plain
	for i := range sqs.Records {
		sqs.Records[i].EventSourceARN += ".fifo"
	}
	payload, _ := json.Marshal(sqs)
	fn := newScripted(t)
	out, err := faas.LambdaHandler(fn.router)(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failedIDs(t, out), []string{msgRetry, msgPerm, msgPlain}; !slices.Equal(got, want) {
		t.Errorf("batchItemFailures = %v, want %v", got, want)
	}
	if got := fn.called(); !slices.Equal(got, []string{"run_ok", "run_retry"}) {
		t.Errorf("handler calls = %v: nothing after the retried message may run", got)
	}
}

func TestLambdaSQSOutOfTime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the invocation's deadline has passed
	fn := newScripted(t)
	out, err := faas.LambdaHandler(fn.router)(ctx, readFixture(t, "sqs_eventbridge.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := failedIDs(t, out); len(got) != 7 {
		t.Errorf("batchItemFailures = %v, want every message back", got)
	}
	if len(fn.called()) != 0 {
		t.Errorf("handler ran after the deadline: %v", fn.called())
	}
}

func TestLambdaEventBridgeDirect(t *testing.T) {
	t.Parallel()
	fixture := string(readFixture(t, "eventbridge_cloudevent.json"))
	cases := []struct {
		name    string
		payload string
		outcome string
		wantErr bool
		handled []string
	}{
		{"cloudevent in detail", fixture, "ack", false, []string{"run_ok_eventbridge"}},
		{"retry", strings.ReplaceAll(fixture, "run_ok_eventbridge", "run_retry_eventbridge"), "", true, []string{"run_retry_eventbridge"}},
		{"permanent", strings.ReplaceAll(fixture, "run_ok_eventbridge", "run_perm_eventbridge"), "permanent_failure", false, []string{"run_perm_eventbridge"}},
		{"plain detail", string(readFixture(t, "eventbridge_plain.json")), "ack", false, []string{"sweep:schedule"}},
		{"no handler for detail-type", strings.Replace(string(readFixture(t, "eventbridge_plain.json")), "io.yuxi.dispatcher.sweep.requested.v1", "Object Created", 1), "malformed", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := newScripted(t)
			out, err := faas.LambdaHandler(fn.router)(t.Context(), json.RawMessage(tc.payload))
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), errTransient.Error()) {
					t.Fatalf("err = %v, want the handler's transient error (Lambda async retry)", err)
				}
			} else {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if rep, ok := out.(faas.LambdaReport); !ok || rep.Outcome != tc.outcome {
					t.Fatalf("result = %#v, want outcome %s", out, tc.outcome)
				}
			}
			if got := fn.called(); !slices.Equal(got, tc.handled) {
				t.Errorf("handler calls = %v, want %v", got, tc.handled)
			}
		})
	}
}

func TestLambdaStructuredCloudEvent(t *testing.T) {
	t.Parallel()
	fixture := string(readFixture(t, "cloudevent.json"))
	fn := newScripted(t)
	h := faas.LambdaHandler(fn.router)

	out, err := h(t.Context(), json.RawMessage(fixture))
	if err != nil || out.(faas.LambdaReport).Outcome != "ack" {
		t.Fatalf("ack: out %#v, err %v", out, err)
	}
	if _, err := h(t.Context(), json.RawMessage(strings.ReplaceAll(fixture, "run_ok_direct", "run_retry_direct"))); err == nil {
		t.Fatal("retry: want an error")
	}
	out, err = h(t.Context(), json.RawMessage(strings.ReplaceAll(fixture, "run_ok_direct", "run_perm_direct")))
	if err != nil || out.(faas.LambdaReport).Outcome != "permanent_failure" {
		t.Fatalf("permanent: out %#v, err %v", out, err)
	}
	if got := fn.called(); !slices.Equal(got, []string{"run_ok_direct", "run_retry_direct", "run_perm_direct"}) {
		t.Errorf("handler calls = %v", got)
	}
	if got := fn.rec.ids(); !slices.Equal(got, []string{"6a7b8c9d0e1f40718293a4b5c6d7e8f6"}) {
		t.Errorf("recorded %v", got)
	}
}

func TestLambdaUnknownPayloads(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{
		``, `null`, `[]`, `"text"`, `42`, `{}`, `{"foo":"bar"}`, `{"Records":"x"}`,
		`{"Records":[{"eventSource":"aws:s3","s3":{}}]}`,
		`{"Records":[{"EventSource":"aws:sns","Sns":{"Message":"{}"}}]}`,
	} {
		fn := newScripted(t)
		out, err := faas.LambdaHandler(fn.router)(t.Context(), json.RawMessage(payload))
		if err == nil {
			t.Errorf("payload %q: result %#v, want an error", payload, out)
		}
		if len(fn.called()) != 0 {
			t.Errorf("payload %q reached the handler", payload)
		}
	}
}

// The Function URL handler (serveLambda with an HTTP handler) streams: what the handler writes and flushes
// reaches Lambda before the handler returns.
func TestLambdaURLStreams(t *testing.T) {
	t.Parallel()
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(readFixture(t, "function_url_sse_request.json"), &req); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	flushErr := make(chan error, 1)
	seen := make(chan *http.Request, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "id: 1\ndata: first\n\n")
		flushErr <- http.NewResponseController(w).Flush()
		<-release
		_, _ = io.WriteString(w, "event: end\ndata: {}\n\n")
	})
	resp, err := lambdaurl.Wrap(faas.StreamingHandler(h))(t.Context(), &req)
	if err != nil {
		t.Fatal(err)
	}
	r := <-seen
	if r.Method != http.MethodGet || r.URL.Path != "/api/runs/run_7d1c2f0c/events" || r.URL.Query().Get("after_seq") != "0" || r.Header.Get("Authorization") != "Bearer test-token" {
		t.Errorf("request = %s %s %v", r.Method, r.URL, r.Header)
	}
	if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Headers)
	}
	first := make([]byte, len("id: 1\ndata: first\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if string(first) != "id: 1\ndata: first\n\n" {
		t.Fatalf("first chunk = %q", first)
	}
	if err := <-flushErr; err != nil {
		t.Fatalf("Flush: %v (SSE handlers need a Flusher)", err)
	}
	close(release) // only now may the handler finish
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, []byte("event: end\ndata: {}\n\n")) {
		t.Errorf("rest = %q", rest)
	}
}
