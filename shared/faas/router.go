// Package faas adapts handlers written once to every place a function runs:
// in-process under the local runner, as a CloudEvents HTTP receiver (Knative,
// Cloud Run, any broker; binary and structured mode; Pub/Sub push), under
// aws-lambda-go (SQS with partial batch failures, EventBridge events, Function
// URL requests, and through a router's Translator the cloud's own payloads,
// such as S3 event records) and under functions-framework-go. Handlers never
// know which one they run under.
//
// A handler decides one of three outcomes: nil (ack), Permanent(err) (ack and
// record, never retried) or any other error (retry). Events that are not valid
// CloudEvents, have no handler, or whose data does not match the type's JSON
// Schema are permanent failures: retrying cannot fix them. They are recorded
// through the router's FailureRecorder (the event_failures table) before the
// transport is answered, never dropped silently.
//
// Google Cloud deliveries are unwrapped first: an Eventarc Pub/Sub trigger's
// google.cloud.pubsub.topic.v1.messagePublished event and a Pub/Sub push
// envelope carry the Yuxi event in message.data, either as a structured JSON
// CloudEvent or as its data with the context in ce- message attributes (the
// CloudEvents Pub/Sub binding); see PubSubMessagePublished.
//
// Imported by: function mains, the local runner, shared/outbox (local relay),
// infra/devbroker (sender and retry classification).
// May import: events, shared/telemetry, shared/pgtext, the CloudEvents SDK, aws-lambda-go,
// functions-framework-go, the JSON Schema validator and the standard library.
package faas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/pgtext"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Outcome is what a delivery resulted in.
type Outcome int

const (
	Ack       Outcome = iota // done
	Failed                   // permanent failure: acknowledged, recorded, never retried
	Retry                    // transient failure: deliver again later
	Malformed                // not a valid event for this receiver: never retried
)

func (o Outcome) String() string {
	switch o {
	case Ack:
		return "ack"
	case Failed:
		return "permanent_failure"
	case Retry:
		return "retry"
	case Malformed:
		return "malformed"
	}
	return "unknown"
}

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as a failure that must not be retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err (or an error it wraps) was marked Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// FailureRecorder keeps permanent failures for inspection (e.g. a table).
type FailureRecorder interface {
	RecordFailure(ctx context.Context, ev cloudevents.Event, handler string, cause error) error
}

// Result of one delivery.
type Result struct {
	Outcome Outcome
	Err     error
}

type route struct {
	handler string
	schema  *jsonschema.Schema
	handle  func(ctx context.Context, data []byte) error
}

// Router maps event types to typed handlers. Build it at start-up, then share
// it read-only between goroutines.
type Router struct {
	name      string
	routes    map[string]route
	recorder  FailureRecorder
	log       *slog.Logger
	translate Translator
	tel       *telemetry.Telemetry
	flushEach bool
}

// Telemetry records a span and RED metrics for every delivery (nil: off).
// flushEach exports them before each delivery returns, for platforms that
// freeze the process after its response (Lambda, Cloud Run functions). Set it
// at start-up.
func (r *Router) Telemetry(t *telemetry.Telemetry, flushEach bool) { r.tel, r.flushEach = t, flushEach }

// Translator turns a payload that is none of the platform's event shapes — a
// cloud service's own notification, such as S3 event records delivered
// straight to a Lambda function or in an SQS message — into the events it
// means. handled=false: not a format it knows; err: a known format that is
// malformed. Zero events (a test notification) is a valid translation.
type Translator func(payload []byte) (evs []cloudevents.Event, handled bool, err error)

// Translate sets the translator LambdaHandler asks about payloads it cannot
// read and EventBridge events no handler takes. Set it at start-up.
func (r *Router) Translate(t Translator) { r.translate = t }

// foreign reports whether ev is for the translator: no handler takes its type.
func (r *Router) foreign(ev cloudevents.Event) bool {
	if r.translate == nil {
		return false
	}
	_, ok := r.routes[ev.Type()]
	return !ok
}

// NewRouter returns a router for the named function. recorder may be nil.
func NewRouter(function string, recorder FailureRecorder, log *slog.Logger) *Router {
	if log == nil {
		log = slog.Default()
	}
	return &Router{name: function, routes: map[string]route{}, recorder: recorder, log: log}
}

// Name is the function's name.
func (r *Router) Name() string { return r.name }

// On registers fn for the event type of T. The data is validated against the
// type's JSON Schema and strictly decoded before fn is called.
func On[T events.Payload](r *Router, fn func(ctx context.Context, in T) error) {
	var zero T
	OnType(r, zero.EventType(), fn)
}

// OnType registers fn for eventType, decoding its data as T (used for aliases
// such as a Knative PingSource tick delivered as a sweep request).
func OnType[T events.Payload](r *Router, eventType string, fn func(ctx context.Context, in T) error) {
	var zero T
	schema, err := compileSchema(zero.EventType())
	if err != nil {
		panic(fmt.Sprintf("faas: %v", err)) // programming error: every payload type ships a schema
	}
	r.routes[eventType] = route{
		handler: r.name + ":" + eventType,
		schema:  schema,
		handle: func(ctx context.Context, data []byte) error {
			if len(bytes.TrimSpace(data)) == 0 {
				data = []byte("{}")
			}
			var doc any
			if err := json.Unmarshal(data, &doc); err != nil {
				return malformed(fmt.Errorf("data is not JSON: %w", err))
			}
			// A NUL or lone surrogate would fail in PostgreSQL on every
			// delivery: refuse it once, recorded, never retried.
			if err := pgtext.CheckJSON(data); err != nil {
				return malformed(fmt.Errorf("data cannot be stored: %w", err))
			}
			if err := schema.Validate(doc); err != nil {
				return malformed(fmt.Errorf("data does not match %s schema: %v", zero.EventType(), err))
			}
			in, err := events.Decode[T](data)
			if err != nil {
				return malformed(err)
			}
			return fn(ctx, in)
		},
	}
}

// Types lists the event types the router handles, sorted.
func (r *Router) Types() []string {
	out := make([]string, 0, len(r.routes))
	for t := range r.routes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Handles reports whether the router has a handler for eventType.
func (r *Router) Handles(eventType string) bool {
	_, ok := r.routes[eventType]
	return ok
}

type malformedError struct{ err error }

func (m malformedError) Error() string { return m.err.Error() }
func (m malformedError) Unwrap() error { return m.err }

func malformed(err error) error { return malformedError{err} }

// noHandlerError is the Malformed cause of an event whose type no handler
// takes: the HTTP receiver answers it with 422 rather than 400.
type noHandlerError struct{ err error }

func (n noHandlerError) Error() string { return n.err.Error() }
func (n noHandlerError) Unwrap() error { return n.err }

// IsNoHandler reports whether err says that no handler takes the event's type.
func IsNoHandler(err error) bool {
	var n noHandlerError
	return errors.As(err, &n)
}

// unrecordedError marks the cause of a permanent failure that could not be
// recorded; it reads and unwraps as the cause itself. A transport that
// acknowledges permanent failures only because they are recorded (Pub/Sub
// push, Eventarc) asks for redelivery instead.
type unrecordedError struct{ cause, record error }

func (u unrecordedError) Error() string { return u.cause.Error() }
func (u unrecordedError) Unwrap() error { return u.cause }

func unrecorded(err error) bool {
	var u unrecordedError
	return errors.As(err, &u)
}

// Deliver runs the handler for ev and classifies the outcome. Permanent
// failures and malformed events are recorded when a recorder is set.
func (r *Router) Deliver(ctx context.Context, ev cloudevents.Event) (res Result) {
	if err := ev.Validate(); err != nil {
		return r.finish(ctx, ev, "", Result{Malformed, fmt.Errorf("invalid CloudEvent: %w", err)})
	}
	rt, ok := r.routes[ev.Type()]
	if !ok && ev.Type() == PubSubMessagePublished {
		return r.deliverMessagePublished(ctx, ev)
	}
	if !ok {
		return r.finish(ctx, ev, "", Result{Malformed, noHandlerError{fmt.Errorf("function %s has no handler for event type %q", r.name, ev.Type())}})
	}
	tp, _ := ev.Extensions()[events.ExtTraceparent].(string)
	if r.tel != nil {
		var inv telemetry.Invocation
		ctx, inv = r.tel.StartEvent(ctx, ev.Type(), ev.ID(), tp)
		defer func() {
			inv.End(res.Outcome.String(), res.Outcome != Ack, res.Err)
			if r.flushEach {
				r.tel.Flush(context.WithoutCancel(ctx))
			}
		}()
	} else if tp != "" {
		ctx = events.WithTraceparent(ctx, tp)
	}
	defer func() {
		if p := recover(); p != nil {
			res = r.finish(ctx, ev, rt.handler, Result{Retry, fmt.Errorf("handler panic: %v", p)})
		}
	}()
	err := rt.handle(ctx, ev.Data())
	var m malformedError
	switch {
	case err == nil:
		return Result{Ack, nil}
	case errors.As(err, &m):
		return r.finish(ctx, ev, rt.handler, Result{Malformed, err})
	case IsPermanent(err):
		return r.finish(ctx, ev, rt.handler, Result{Failed, err})
	default:
		return r.finish(ctx, ev, rt.handler, Result{Retry, err})
	}
}

func (r *Router) finish(ctx context.Context, ev cloudevents.Event, handler string, res Result) Result {
	if handler == "" {
		handler = r.name
	}
	switch res.Outcome {
	case Failed, Malformed:
		r.log.Warn("event not processed", "function", r.name, "type", ev.Type(), "id", ev.ID(), "outcome", res.Outcome.String(), "error", res.Err)
		if r.recorder != nil && ev.ID() != "" {
			if err := r.recorder.RecordFailure(context.WithoutCancel(ctx), ev, handler, res.Err); err != nil {
				r.log.Error("record event failure", "error", err)
				res.Err = unrecordedError{res.Err, err}
			}
		}
	case Retry:
		r.log.Info("event will be retried", "function", r.name, "type", ev.Type(), "id", ev.ID(), "error", res.Err)
	}
	return res
}

func compileSchema(eventType string) (*jsonschema.Schema, error) {
	raw, err := events.Schema(eventType)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", eventType, err)
	}
	// An absolute resource URL keeps validation messages free of local paths.
	url := "https://yuxi.io/events/" + eventType + ".json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}
