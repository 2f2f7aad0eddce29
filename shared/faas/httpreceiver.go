package faas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// MaxEventBytes caps the body of one delivered event. Events carry ids, never
// large data (see events/), so anything bigger is a broken producer.
const MaxEventBytes = 1 << 20

// Error codes in the JSON bodies of receiver responses.
const (
	CodeInvalidEvent     = "invalid_event"     // 400: not a CloudEvent, or data fails the schema
	CodeNoHandler        = "no_handler"        // 422: no handler takes the event's type (recorded)
	CodeEventTooLarge    = "event_too_large"   // 413: body over MaxEventBytes
	CodePermanentFailure = "permanent_failure" // 422: the handler returned Permanent(err)
	CodeRetry            = "retry"             // 503: transient failure, deliver again
	CodeMethodNotAllowed = "method_not_allowed"
)

// NewHTTPReceiver returns the CloudEvents HTTP receiver for r, as Knative
// Services, Cloud Run and any CloudEvents broker deliver to it: POST in binary
// or structured content mode (batched mode is refused), GET /healthz for
// readiness.
//
// Status codes are chosen for Knative's delivery contract (its dispatcher
// retries 5xx, 404, 408, 409 and 429, nothing else):
//
//	Ack       → 200, empty body (a non-empty 2xx body would be read as a reply event)
//	Malformed → 400 invalid_event      never retried
//	no handler→ 422 no_handler         recorded, never retried; a dead-letter sink sees it
//	Failed    → 422 permanent_failure  never retried; a dead-letter sink sees it
//	Retry     → 503 retry              redelivered with backoff
//
// Google Cloud deliveries are accepted too: an Eventarc Pub/Sub trigger's
// messagePublished CloudEvent and a Pub/Sub push envelope (a JSON POST of
// {"message":…,"subscription":…} without CloudEvents headers) are unwrapped by
// the router and the Yuxi event inside is delivered. Pub/Sub and Eventarc
// redeliver every non-2xx answer until the message expires, so for them a
// recorded permanent failure, an unroutable type or an envelope carrying no
// valid event is answered 200 with an empty body once it is recorded (503 when
// recording failed, so that it comes back); Retry stays 503.
//
// The request's context is passed to the handler, so a sender that gives up
// cancels the work.
func NewHTTPReceiver(r *Router) http.Handler {
	return &httpReceiver{router: r}
}

type httpReceiver struct {
	router *Router
}

func (h *httpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/healthz" && (req.Method == http.MethodGet || req.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"status":"ok"}`)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "CloudEvents are delivered with POST")
		return
	}
	ev, status, err := readHTTPEvent(req, MaxEventBytes)
	if err != nil {
		code := CodeInvalidEvent
		if status == http.StatusRequestEntityTooLarge {
			code = CodeEventTooLarge
		}
		h.router.log.Warn("rejected delivery", "function", h.router.name, "status", status, "error", err)
		writeError(w, status, code, err.Error())
		return
	}
	// A Pub/Sub delivery whose envelope is a valid event has been recorded
	// when it failed; only 2xx stops Pub/Sub redelivering it.
	pubsub := ev.Type() == PubSubMessagePublished && !h.router.Handles(PubSubMessagePublished) && ev.Validate() == nil
	res := h.router.Deliver(req.Context(), ev)
	switch res.Outcome {
	case Ack:
		w.WriteHeader(http.StatusOK)
	case Failed, Malformed:
		switch {
		case pubsub && unrecorded(res.Err):
			writeError(w, http.StatusServiceUnavailable, CodeRetry, "not recorded, deliver again: "+res.Err.Error())
		case pubsub:
			w.WriteHeader(http.StatusOK)
		case res.Outcome == Failed:
			writeError(w, http.StatusUnprocessableEntity, CodePermanentFailure, res.Err.Error())
		case IsNoHandler(res.Err):
			writeError(w, http.StatusUnprocessableEntity, CodeNoHandler, res.Err.Error())
		default:
			writeError(w, http.StatusBadRequest, CodeInvalidEvent, res.Err.Error())
		}
	default:
		writeError(w, http.StatusServiceUnavailable, CodeRetry, res.Err.Error())
	}
}

// readHTTPEvent decodes one binary- or structured-mode CloudEvent from req,
// or wraps a Pub/Sub push envelope in a messagePublished event.
// On error it also returns the status to answer with (400 or 413).
func readHTTPEvent(req *http.Request, limit int64) (ev cloudevents.Event, status int, err error) {
	// Read the capped body first so an oversized event is told apart from a
	// malformed one, whatever the SDK does with the reader's error.
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return ev, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(body)) > limit {
		return ev, http.StatusRequestEntityTooLarge, fmt.Errorf("event body exceeds %d bytes", limit)
	}
	msg := cehttp.NewMessage(req.Header, io.NopCloser(bytes.NewReader(body)))
	switch msg.ReadEncoding() {
	case binding.EncodingBatch:
		return ev, http.StatusBadRequest, errors.New("batched CloudEvents are not accepted; send one event per request")
	case binding.EncodingUnknown:
		if e, ok := cloudSchedulerTick(req.Header); ok {
			return e, 0, nil
		}
		if e, ok := pushEnvelopeEvent(body); ok {
			return e, 0, nil
		}
		return ev, http.StatusBadRequest, fmt.Errorf("not a CloudEvent: no ce-specversion header and content type %q is not a CloudEvents format", req.Header.Get("Content-Type"))
	}
	e, err := binding.ToEvent(req.Context(), msg)
	if err != nil {
		return ev, http.StatusBadRequest, fmt.Errorf("decode CloudEvent: %w", err)
	}
	// Attribute validation is left to Router.Deliver, which records the
	// rejected event like it does on every other transport.
	return *e, 0, nil
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: code, Message: message}})
}
