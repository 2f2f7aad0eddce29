package faas_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

type errorResponse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestReceiverWithSDKClient(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name  string
		force func(context.Context) context.Context
	}{
		{"binary", binding.WithForceBinary},
		{"structured", binding.WithForceStructured},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			fn := newScripted(t)
			srv := httptest.NewServer(faas.NewHTTPReceiver(fn.router))
			t.Cleanup(srv.Close)
			client, err := cloudevents.NewClientHTTP(cehttp.WithTarget(srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			ctx := mode.force(t.Context())

			if res := client.Send(ctx, stepEvent(t, "ev-ok", "run_ok")); !cloudevents.IsACK(res) {
				t.Fatalf("ack: got %v", res)
			}
			if got := fn.called(); !slices.Equal(got, []string{"run_ok"}) {
				t.Fatalf("handler calls = %v, want [run_ok]", got)
			}

			for _, tc := range []struct {
				id, run string
				status  int
			}{
				{"ev-perm", "run_perm", http.StatusUnprocessableEntity},
				{"ev-retry", "run_retry", http.StatusServiceUnavailable},
			} {
				res := client.Send(ctx, stepEvent(t, tc.id, tc.run))
				var hr *cehttp.Result
				if !cloudevents.ResultAs(res, &hr) || hr.StatusCode != tc.status {
					t.Fatalf("%s: got %v, want HTTP %d", tc.run, res, tc.status)
				}
			}
			if got := fn.rec.ids(); !slices.Equal(got, []string{"ev-perm"}) {
				t.Fatalf("recorded %v, want only the permanent failure", got)
			}
		})
	}
}

const stepData = `{"run_id":"run_ok","thread_id":"thread_42","step_no":2}`

func binaryRequest(t *testing.T, headers map[string]string, body string) *http.Request {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", "ev-1")
	req.Header.Set("Ce-Source", "/yuxi/tool-invoke")
	req.Header.Set("Ce-Type", events.TypeStepReady)
	req.Header.Set("Ce-Runid", "run_ok")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

// structured returns a structured-mode body with the attributes of a valid
// StepReady event, changed by edit (a nil value deletes the attribute).
func structured(t *testing.T, edit map[string]any) string {
	t.Helper()
	doc := map[string]any{
		"specversion":     "1.0",
		"id":              "ev-1",
		"source":          "/yuxi/tool-invoke",
		"type":            events.TypeStepReady,
		"datacontenttype": "application/json",
		"runid":           "run_ok",
		"data":            json.RawMessage(stepData),
	}
	for k, v := range edit {
		if v == nil {
			delete(doc, k)
		} else {
			doc[k] = v
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func structuredRequest(t *testing.T, body string) *http.Request {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents+json; charset=utf-8")
	return req
}

func TestReceiverRawRequests(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile("testdata/cloudevent.json")
	if err != nil {
		t.Fatal(err)
	}
	type recordWant int
	const (
		anyRecord recordWant = iota
		recordedYes
		recordedNo
	)
	cases := []struct {
		name     string
		req      func(t *testing.T) *http.Request
		status   int
		code     string
		handled  []string
		recorded recordWant
	}{
		{name: "binary", req: func(t *testing.T) *http.Request { return binaryRequest(t, nil, stepData) },
			status: 200, handled: []string{"run_ok"}, recorded: recordedNo},
		{name: "structured", req: func(t *testing.T) *http.Request { return structuredRequest(t, structured(t, nil)) },
			status: 200, handled: []string{"run_ok"}, recorded: recordedNo},
		{name: "structured fixture", req: func(t *testing.T) *http.Request { return structuredRequest(t, string(fixture)) },
			status: 200, handled: []string{"run_ok_direct"}, recorded: recordedNo},
		{name: "binary permanent failure", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, nil, `{"run_id":"run_perm","thread_id":"t","step_no":1}`)
		}, status: 422, code: faas.CodePermanentFailure, handled: []string{"run_perm"}, recorded: recordedYes},
		{name: "binary retry", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, nil, `{"run_id":"run_retry","thread_id":"t","step_no":1}`)
		}, status: 503, code: faas.CodeRetry, handled: []string{"run_retry"}, recorded: recordedNo},

		// Invalid events: 400, the handler never runs.
		{name: "binary missing id", req: func(t *testing.T) *http.Request { return binaryRequest(t, map[string]string{"Ce-Id": ""}, stepData) },
			status: 400, code: faas.CodeInvalidEvent},
		{name: "binary missing source", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, map[string]string{"Ce-Source": ""}, stepData)
		}, status: 400, code: faas.CodeInvalidEvent},
		{name: "binary missing type", req: func(t *testing.T) *http.Request { return binaryRequest(t, map[string]string{"Ce-Type": ""}, stepData) },
			status: 400, code: faas.CodeInvalidEvent},
		{name: "binary missing specversion", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, map[string]string{"Ce-Specversion": ""}, stepData)
		}, status: 400, code: faas.CodeInvalidEvent, recorded: recordedNo},
		{name: "binary unknown specversion", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, map[string]string{"Ce-Specversion": "9.9"}, stepData)
		}, status: 400, code: faas.CodeInvalidEvent},
		{name: "structured missing id", req: func(t *testing.T) *http.Request {
			return structuredRequest(t, structured(t, map[string]any{"id": nil}))
		},
			status: 400, code: faas.CodeInvalidEvent},
		{name: "structured missing source", req: func(t *testing.T) *http.Request {
			return structuredRequest(t, structured(t, map[string]any{"source": nil}))
		}, status: 400, code: faas.CodeInvalidEvent},
		{name: "structured missing type", req: func(t *testing.T) *http.Request {
			return structuredRequest(t, structured(t, map[string]any{"type": nil}))
		}, status: 400, code: faas.CodeInvalidEvent},
		{name: "structured missing specversion", req: func(t *testing.T) *http.Request {
			return structuredRequest(t, structured(t, map[string]any{"specversion": nil}))
		}, status: 400, code: faas.CodeInvalidEvent},
		{name: "structured bad JSON", req: func(t *testing.T) *http.Request { return structuredRequest(t, `{"specversion":"1.0","id":`) },
			status: 400, code: faas.CodeInvalidEvent, recorded: recordedNo},
		{name: "binary data not JSON", req: func(t *testing.T) *http.Request { return binaryRequest(t, nil, `{"run_id":`) },
			status: 400, code: faas.CodeInvalidEvent, recorded: recordedYes},
		{name: "data fails schema", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, nil, `{"run_id":"run_ok","thread_id":"thread_42","step_no":0}`)
		}, status: 400, code: faas.CodeInvalidEvent, recorded: recordedYes},
		{name: "data has unknown field", req: func(t *testing.T) *http.Request {
			return structuredRequest(t, structured(t, map[string]any{"data": map[string]any{"run_id": "r", "thread_id": "t", "step_no": 1, "extra": true}}))
		}, status: 400, code: faas.CodeInvalidEvent, recorded: recordedYes},
		{name: "unknown type", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, map[string]string{"Ce-Type": "io.yuxi.unknown.v1"}, stepData)
		}, status: 422, code: faas.CodeNoHandler, recorded: recordedYes},
		{name: "batch", req: func(t *testing.T) *http.Request {
			req := structuredRequest(t, "["+structured(t, nil)+"]")
			req.Header.Set("Content-Type", "application/cloudevents-batch+json")
			return req
		}, status: 400, code: faas.CodeInvalidEvent, recorded: recordedNo},
		{name: "too large", req: func(t *testing.T) *http.Request {
			return binaryRequest(t, nil, `{"run_id":"`+strings.Repeat("x", faas.MaxEventBytes)+`"}`)
		}, status: 413, code: faas.CodeEventTooLarge, recorded: recordedNo},
		{name: "wrong method", req: func(t *testing.T) *http.Request { return httptest.NewRequest(http.MethodGet, "/", nil) },
			status: 405, code: faas.CodeMethodNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fn := newScripted(t)
			w := httptest.NewRecorder()
			faas.NewHTTPReceiver(fn.router).ServeHTTP(w, tc.req(t))
			if w.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if tc.code == "" {
				if w.Body.Len() != 0 {
					t.Errorf("ack body = %q, want empty (a 2xx body would be read as a reply event)", w.Body)
				}
			} else {
				var body errorResponse
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("error body %q: %v", w.Body, err)
				}
				if body.Error.Code != tc.code || body.Error.Message == "" {
					t.Errorf("error = %+v, want code %s and a message", body.Error, tc.code)
				}
			}
			if got := fn.called(); !slices.Equal(got, tc.handled) {
				t.Errorf("handler calls = %v, want %v", got, tc.handled)
			}
			switch got := len(fn.rec.ids()); tc.recorded {
			case recordedYes:
				if got != 1 {
					t.Errorf("recorded %d failures, want 1", got)
				}
			case recordedNo:
				if got != 0 {
					t.Errorf("recorded %d failures, want none", got)
				}
			}
		})
	}
}

func TestReceiverRecordsPermanentFailure(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	w := httptest.NewRecorder()
	faas.NewHTTPReceiver(fn.router).ServeHTTP(w, binaryRequest(t, map[string]string{"Ce-Id": "ev-perm"}, `{"run_id":"run_perm","thread_id":"t","step_no":1}`))
	if w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("status = %d", w.Code)
	}
	got, ok := fn.rec.find("ev-perm")
	if !ok {
		t.Fatalf("recorder has %v, want ev-perm", fn.rec.ids())
	}
	if got.Type != events.TypeStepReady || got.Handler != "test-fn:"+events.TypeStepReady || !strings.Contains(got.Cause.Error(), "step refused") {
		t.Errorf("recorded %+v", got)
	}
}

func TestReceiverHealthz(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	faas.NewHTTPReceiver(newScripted(t).router).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d", w.Code)
	}
}

// The handler runs under the request's context: a sender that gives up
// cancels the work.
func TestReceiverPropagatesRequestContext(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	srv := httptest.NewServer(faas.NewHTTPReceiver(fn.router))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(t.Context())
	req := binaryRequest(t, nil, `{"run_id":"run_block","thread_id":"t","step_no":1}`).WithContext(ctx)
	req.RequestURI = ""
	req.URL, _ = req.URL.Parse(srv.URL)
	done := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-fn.started
	cancel()
	if err := <-fn.blocked; err == nil {
		t.Fatal("handler context was not cancelled when the client went away")
	}
	if err := <-done; err == nil {
		t.Fatal("client request should have failed with its context")
	}
}

// Issue 9: a NUL (or a lone surrogate) in event data would fail in
// PostgreSQL on every delivery; it is a permanent failure, recorded in
// event_failures, and the handler never runs (on main it was retried forever).
func TestReceiverNULInDataIsPermanent(t *testing.T) {
	t.Parallel()
	for id, data := range map[string]string{
		"ev-nul":       `{"run_id":"run_\u0000x","thread_id":"t","step_no":1}`,
		"ev-surrogate": `{"run_id":"run_x","thread_id":"\ud800","step_no":1}`,
	} {
		fn := newScripted(t)
		w := httptest.NewRecorder()
		faas.NewHTTPReceiver(fn.router).ServeHTTP(w, binaryRequest(t, map[string]string{"Ce-Id": id}, data))
		if w.Code/100 != 4 || w.Code == http.StatusTooManyRequests || w.Code == http.StatusRequestTimeout {
			t.Fatalf("%s: status %d, want a non-retryable 4xx", id, w.Code)
		}
		if got, ok := fn.rec.find(id); !ok || !strings.Contains(got.Cause.Error(), "cannot be stored") {
			t.Fatalf("%s: recorder has %v (%+v)", id, fn.rec.ids(), got)
		}
		if calls := fn.called(); len(calls) != 0 {
			t.Fatalf("%s: the handler ran: %v", id, calls)
		}
	}
}
