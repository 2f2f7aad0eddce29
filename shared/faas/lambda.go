package faas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// LambdaReport is what LambdaHandler returns for a single event (a direct
// EventBridge invocation or a structured CloudEvent): the outcome, for logs
// and synchronous callers. Retries are signalled by the handler's error, not
// by this value.
type LambdaReport struct {
	ID      string `json:"id,omitempty"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// LambdaHandler adapts r to aws-lambda-go. It accepts three payload shapes:
//
//   - an SQS event (Records with eventSource "aws:sqs"), the EventBridge rule →
//     SQS → Lambda wiring. Each body is an EventBridge event or a structured
//     CloudEvent (see below). It returns events.SQSEventResponse listing only the
//     messages to retry (the event source mapping must enable
//     ReportBatchItemFailures). Failed and Malformed messages are acknowledged:
//     the router has recorded them, and SQS redelivery cannot fix them. On a
//     FIFO queue, messages after the first retry are retried unprocessed, so the
//     order within a message group holds.
//   - an EventBridge event delivered directly (async invoke): Retry returns an
//     error so Lambda's async retry and on-failure destination apply; other
//     outcomes return a LambdaReport and nil.
//   - a structured CloudEvent (direct invoke): as for EventBridge.
//
// An EventBridge event's detail is either a structured CloudEvent (what the
// outbox relay puts there) or plain data, in which case the event's type is
// detail-type, its source is source and its id is id.
//
// A payload of none of these shapes — records of another event source
// (aws:s3, aws:sns), an SQS body that is neither, or an EventBridge event whose
// detail-type no handler takes (S3's "Object Created") — goes to the router's
// Translator, if it has one, and the events it yields are delivered in turn:
// the payload (or SQS message) is retried if any of them is.
//
// Any other payload is an error; the handler never panics on input.
func LambdaHandler(r *Router) func(ctx context.Context, payload json.RawMessage) (any, error) {
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		var probe struct {
			Records     []json.RawMessage `json:"Records"`
			DetailType  *string           `json:"detail-type"`
			SpecVersion string            `json:"specversion"`
		}
		if err := json.Unmarshal(payload, &probe); err != nil {
			return nil, fmt.Errorf("lambda payload is not a JSON object: %w", err)
		}
		switch {
		case probe.Records != nil:
			var sqs events.SQSEvent
			if err := json.Unmarshal(payload, &sqs); err != nil {
				return nil, fmt.Errorf("decode SQS event: %w", err)
			}
			for i, rec := range sqs.Records {
				if rec.EventSource != "aws:sqs" {
					if evs, ok, err := r.translated(payload); ok {
						return r.lambdaMany(ctx, payload, evs, err)
					}
					return nil, fmt.Errorf("record %d comes from %q; only aws:sqs records are supported", i, rec.EventSource)
				}
			}
			return r.deliverSQS(ctx, sqs), nil
		case probe.DetailType != nil:
			ev, err := fromEventBridgeJSON(payload)
			if err == nil && r.foreign(ev) {
				if evs, ok, terr := r.translate(payload); ok {
					return r.lambdaMany(ctx, payload, evs, terr)
				}
			}
			return r.lambdaSingle(ctx, ev, err)
		case probe.SpecVersion != "":
			ev := cloudevents.NewEvent()
			if err := json.Unmarshal(payload, &ev); err != nil {
				return r.lambdaSingle(ctx, ev, fmt.Errorf("decode structured CloudEvent: %w", err))
			}
			return r.lambdaSingle(ctx, ev, nil)
		}
		if evs, ok, err := r.translated(payload); ok {
			return r.lambdaMany(ctx, payload, evs, err)
		}
		return nil, errors.New("unsupported lambda payload: expected an SQS event, an EventBridge event or a structured CloudEvent")
	}
}

// translated asks the router's translator, if any, about raw.
func (r *Router) translated(raw []byte) ([]cloudevents.Event, bool, error) {
	if r.translate == nil {
		return nil, false, nil
	}
	return r.translate(raw)
}

// deliverAll delivers translated events in order and returns the worst
// outcome: retry over a permanent failure over ack. terr is the translation's
// error: the payload is then recorded as malformed under id.
func (r *Router) deliverAll(ctx context.Context, id string, raw []byte, evs []cloudevents.Event, terr error) Result {
	if terr != nil {
		ev := cloudevents.NewEvent()
		ev.SetID(id)
		ev.SetSource("/yuxi/" + r.name + "/translator")
		_ = ev.SetData("text/plain", raw)
		return r.finish(ctx, ev, "", Result{Malformed, fmt.Errorf("translate payload: %w", terr)})
	}
	worst := Result{Outcome: Ack}
	for _, ev := range evs {
		res := r.Deliver(ctx, ev)
		if res.Outcome == Retry || (res.Outcome != Ack && worst.Outcome == Ack) {
			worst = res
		}
		if res.Outcome == Retry {
			break // the whole payload comes again; handlers are idempotent
		}
	}
	return worst
}

// lambdaMany delivers the events of a directly invoked foreign payload.
func (r *Router) lambdaMany(ctx context.Context, raw []byte, evs []cloudevents.Event, terr error) (any, error) {
	id := ""
	if len(evs) > 0 {
		id = evs[0].ID()
	}
	res := r.deliverAll(ctx, id, raw, evs, terr)
	rep := LambdaReport{ID: id, Outcome: res.Outcome.String()}
	if res.Err != nil {
		rep.Error = res.Err.Error()
	}
	if res.Outcome == Retry {
		return nil, fmt.Errorf("translated payload: %w", res.Err)
	}
	return rep, nil
}

// lambdaSingle delivers one directly invoked event. decodeErr is a decoding
// failure; ev then holds what could be read (maybe nothing) and is rejected.
func (r *Router) lambdaSingle(ctx context.Context, ev cloudevents.Event, decodeErr error) (any, error) {
	var res Result
	if decodeErr != nil {
		res = r.finish(ctx, ev, "", Result{Malformed, decodeErr})
	} else {
		res = r.Deliver(ctx, ev)
	}
	rep := LambdaReport{ID: ev.ID(), Outcome: res.Outcome.String()}
	if res.Err != nil {
		rep.Error = res.Err.Error()
	}
	if res.Outcome == Retry {
		return nil, fmt.Errorf("event %s: %w", ev.ID(), res.Err)
	}
	return rep, nil
}

func (r *Router) deliverSQS(ctx context.Context, sqs events.SQSEvent) events.SQSEventResponse {
	out := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	retryRest := false
	for _, rec := range sqs.Records {
		// Once the invocation is out of time, or a FIFO group must keep its
		// order, hand the remaining messages back unprocessed.
		if retryRest || ctx.Err() != nil {
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		var res Result
		ev, err := decodeSQSBody([]byte(rec.Body))
		if r.translate != nil && (err != nil || r.foreign(ev)) {
			if evs, ok, terr := r.translate([]byte(rec.Body)); ok {
				res = r.deliverAll(ctx, rec.MessageId, []byte(rec.Body), evs, terr)
				if res.Outcome == Retry {
					out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
					retryRest = strings.HasSuffix(rec.EventSourceARN, ".fifo")
				}
				continue
			}
		}
		if err != nil {
			// Keep the undecodable body with the message id so the recorder
			// has something to show.
			ev = cloudevents.NewEvent()
			ev.SetID(rec.MessageId)
			ev.SetSource(rec.EventSourceARN)
			_ = ev.SetData("text/plain", []byte(rec.Body))
			res = r.finish(ctx, ev, "", Result{Malformed, fmt.Errorf("SQS message %s: %w", rec.MessageId, err)})
		} else {
			res = r.Deliver(ctx, ev)
		}
		if res.Outcome == Retry {
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			retryRest = strings.HasSuffix(rec.EventSourceARN, ".fifo")
		}
	}
	return out
}

// decodeSQSBody reads an SQS message body: an EventBridge event (as an
// EventBridge rule with an SQS target writes it) or a structured CloudEvent.
func decodeSQSBody(body []byte) (cloudevents.Event, error) {
	var probe struct {
		DetailType  *string `json:"detail-type"`
		SpecVersion string  `json:"specversion"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return cloudevents.Event{}, fmt.Errorf("body is not JSON: %w", err)
	}
	switch {
	case probe.DetailType != nil:
		return fromEventBridgeJSON(body)
	case probe.SpecVersion != "":
		ev := cloudevents.NewEvent()
		if err := json.Unmarshal(body, &ev); err != nil {
			return ev, fmt.Errorf("decode structured CloudEvent: %w", err)
		}
		return ev, nil
	}
	return cloudevents.Event{}, errors.New("body is neither an EventBridge event nor a structured CloudEvent")
}

// fromEventBridgeJSON turns an EventBridge event into a CloudEvent: the
// structured CloudEvent in its detail, or else detail as JSON data with type =
// detail-type, source = source and id = id. On error the returned event holds
// the envelope's id and source, so a rejection can be recorded against them.
func fromEventBridgeJSON(raw []byte) (cloudevents.Event, error) {
	var eb events.EventBridgeEvent
	if err := json.Unmarshal(raw, &eb); err != nil {
		return cloudevents.Event{}, fmt.Errorf("decode EventBridge event: %w", err)
	}
	if ev, ok := scheduledRuleTick(eb.DetailType, eb.Source, eb.ID, eb.Resources, eb.Time); ok {
		return ev, nil
	}
	detail := bytes.TrimSpace(eb.Detail)
	var probe struct {
		SpecVersion string `json:"specversion"`
	}
	if len(detail) > 0 && detail[0] == '{' {
		if err := json.Unmarshal(detail, &probe); err != nil {
			return envelopeOnly(eb), fmt.Errorf("EventBridge event %s: detail is not JSON: %w", eb.ID, err)
		}
	}
	if probe.SpecVersion != "" {
		ev := cloudevents.NewEvent()
		if err := json.Unmarshal(detail, &ev); err != nil {
			return envelopeOnly(eb), fmt.Errorf("EventBridge event %s: decode CloudEvent in detail: %w", eb.ID, err)
		}
		return ev, nil
	}
	ev := envelopeOnly(eb)
	ev.SetType(eb.DetailType)
	if !eb.Time.IsZero() {
		ev.SetTime(eb.Time)
	}
	if len(detail) > 0 && !bytes.Equal(detail, []byte("null")) {
		if err := ev.SetData(cloudevents.ApplicationJSON, []byte(detail)); err != nil {
			return ev, fmt.Errorf("EventBridge event %s: %w", eb.ID, err)
		}
	}
	return ev, nil
}

func envelopeOnly(eb events.EventBridgeEvent) cloudevents.Event {
	ev := cloudevents.NewEvent()
	ev.SetID(eb.ID)
	ev.SetSource(eb.Source)
	return ev
}

// serveLambda runs under the Lambda runtime API, with ctx as the base
// context of invocations, and never returns (the runtime loop exits the
// process on fatal errors): r for SQS, EventBridge and direct invocations
// (see LambdaHandler), or h behind a Lambda Function URL configured with
// InvokeMode RESPONSE_STREAM (the intake; SSE needs streaming).
//
// lambdaurl pipes everything h writes straight to the runtime API as the
// streamed response body; the status and headers go out with the first Write
// or WriteHeader. Its ResponseWriter does not implement http.Flusher, so
// handlers that flush (SSE) would think streaming is unsupported; h is given a
// writer whose Flush is a no-op, which is accurate because nothing is buffered.
func serveLambda(ctx context.Context, r *Router, h http.Handler) {
	if h != nil {
		lambdaurl.Start(streamingHandler(h), lambda.WithContext(ctx))
		return
	}
	lambda.StartWithOptions(LambdaHandler(r), lambda.WithContext(ctx))
}

// streamingHandler gives h a ResponseWriter that implements http.Flusher.
func streamingHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, ok := w.(http.Flusher); ok {
			h.ServeHTTP(w, req)
			return
		}
		h.ServeHTTP(unbufferedWriter{w}, req)
	})
}

// unbufferedWriter marks a ResponseWriter that writes through unbuffered.
type unbufferedWriter struct{ http.ResponseWriter }

func (unbufferedWriter) Flush()                        {}
func (w unbufferedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
