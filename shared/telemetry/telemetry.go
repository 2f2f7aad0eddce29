// Package telemetry records OpenTelemetry traces and RED metrics: a span for
// every function invocation (faas.Router, intake's HTTP edge), model call,
// tool call, retrieval and heavy store call, joined across functions through
// the events' traceparent extension; request counts, errors and durations per
// function. Spans and metrics are exported over OTLP/HTTP (protobuf) when an
// endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT, read by main), and to
// Langfuse through its OTLP endpoint with the user, session and thread
// attributes its integration reads.
//
// Off (no endpoint), nothing is recorded and Start costs no allocation: a
// span is started only under a recording parent, and only the invocation
// edges hold a Telemetry (nil when off). Spans below the edges take their
// tracer from the parent span in ctx, so no package holds a tracer.
//
// Imported by: shared/bootstrap (Setup), shared/faas (invocations),
// functions/intake (HTTP spans), and the packages that start child spans
// (shared/llm, shared/agent, shared/tool, shared/kb, shared/run), and tests.
// May import: events, the standard library and go.opentelemetry.io/otel.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/yuxi-serverless/yuxi/events"
)

// Config says where telemetry goes. An empty Endpoint turns it off.
type Config struct {
	Service  string            // service.name: the function
	Endpoint string            // OTEL_EXPORTER_OTLP_ENDPOINT: base URL; /v1/traces and /v1/metrics are appended
	Headers  map[string]string // OTEL_EXPORTER_OTLP_HEADERS (Langfuse: Authorization=Basic …)
	// FlushEvery is how often batched spans and metrics are exported
	// (OTEL_BSP_SCHEDULE_DELAY, default 1s). Functions frozen after their
	// response (Lambda) also flush at the end of each invocation (Flush).
	FlushEvery time.Duration
}

// ParseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: "k=v,k2=v2", values
// URL-encoded.
func ParseHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("header %q: want key=value", kv)
		}
		dv, err := url.QueryUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[strings.TrimSpace(k)] = dv
	}
	return out, nil
}

// Telemetry is one process's tracer and meter. A nil *Telemetry is off and
// every method is a no-op.
type Telemetry struct {
	service string
	tracer  trace.Tracer
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider

	invocations metric.Int64Counter
	errors      metric.Int64Counter
	duration    metric.Float64Histogram
}

// Setup returns the process's telemetry, or nil when cfg.Endpoint is empty.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = time.Second
	}
	base := strings.TrimSuffix(cfg.Endpoint, "/")
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("OTLP endpoint: %w", err)
	}
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(base+"/v1/traces"), otlptracehttp.WithHeaders(cfg.Headers))
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"), otlpmetrichttp.WithHeaders(cfg.Headers))
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", cfg.Service), attribute.String("service.namespace", "yuxi"))
	t := &Telemetry{service: cfg.Service}
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(texp, sdktrace.WithBatchTimeout(cfg.FlushEvery)),
	)
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(max(cfg.FlushEvery, time.Second)))))
	t.tracer = t.tp.Tracer("github.com/yuxi-serverless/yuxi")
	m := t.mp.Meter("github.com/yuxi-serverless/yuxi")
	if t.invocations, err = m.Int64Counter("yuxi.invocations", metric.WithDescription("function invocations (events handled, HTTP requests served)")); err != nil {
		return nil, err
	}
	if t.errors, err = m.Int64Counter("yuxi.invocation.errors", metric.WithDescription("invocations that failed (retried, refused or 5xx)")); err != nil {
		return nil, err
	}
	if t.duration, err = m.Float64Histogram("yuxi.invocation.duration", metric.WithUnit("s"), metric.WithDescription("invocation duration")); err != nil {
		return nil, err
	}
	return t, nil
}

// Flush exports what is buffered (Lambda: before the invocation returns).
func (t *Telemetry) Flush(ctx context.Context) {
	if t == nil {
		return
	}
	_ = t.tp.ForceFlush(ctx)
	_ = t.mp.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// Invocation is a function invocation in progress: its span and RED metrics.
// The zero Invocation (telemetry off) does nothing.
type Invocation struct {
	t     *Telemetry
	span  trace.Span
	kind  string // "event" | "http"
	name  string
	start time.Time
}

// StartEvent starts the invocation span of a function handling an event,
// continuing the trace of the event's traceparent (the producer's span is
// its parent), and puts the span's traceparent in ctx for the events the
// handler writes.
func (t *Telemetry) StartEvent(ctx context.Context, eventType, eventID, traceparent string) (context.Context, Invocation) {
	if t == nil {
		return ctx, Invocation{}
	}
	if sc, ok := ParseTraceparent(traceparent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := t.tracer.Start(ctx, t.service+" process "+eventType, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("faas.trigger", "pubsub"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("cloudevents.event_type", eventType),
			attribute.String("cloudevents.event_id", eventID),
		))
	ctx = events.WithTraceparent(ctx, Traceparent(span.SpanContext()))
	return ctx, Invocation{t: t, span: span, kind: "event", name: eventType, start: time.Now()}
}

// StartHTTP starts the server span of an HTTP request (intake). route is the
// route pattern, not the path.
func (t *Telemetry) StartHTTP(ctx context.Context, method, route, traceparent string) (context.Context, Invocation) {
	if t == nil {
		return ctx, Invocation{}
	}
	if sc, ok := ParseTraceparent(traceparent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := t.tracer.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route)))
	ctx = events.WithTraceparent(ctx, Traceparent(span.SpanContext()))
	return ctx, Invocation{t: t, span: span, kind: "http", name: method + " " + route, start: time.Now()}
}

// SetAttributes adds attributes to the invocation span.
func (inv Invocation) SetAttributes(kv ...attribute.KeyValue) {
	if inv.t != nil {
		inv.span.SetAttributes(kv...)
	}
}

// End ends the invocation: outcome names how it ended ("ack", "retry",
// "permanent_failure", "malformed", or an HTTP status class), failed whether
// it counts as an error.
func (inv Invocation) End(outcome string, failed bool, err error) {
	if inv.t == nil {
		return
	}
	attrs := metric.WithAttributes(attribute.String("faas.name", inv.t.service), attribute.String("yuxi.invocation.kind", inv.kind),
		attribute.String("yuxi.invocation.name", inv.name), attribute.String("yuxi.outcome", outcome))
	ctx := context.Background()
	inv.t.invocations.Add(ctx, 1, attrs)
	inv.t.duration.Record(ctx, time.Since(inv.start).Seconds(), attrs)
	inv.span.SetAttributes(attribute.String("yuxi.outcome", outcome))
	if failed {
		inv.t.errors.Add(ctx, 1, attrs)
		if err != nil {
			inv.span.RecordError(err)
			inv.span.SetStatus(codes.Error, err.Error())
		} else {
			inv.span.SetStatus(codes.Error, outcome)
		}
	}
	inv.span.End()
}

// Span is a child span; the zero Span (not recording) does nothing.
type Span struct{ s trace.Span }

// Start starts a child span of the span in ctx, when that span records;
// otherwise it returns ctx unchanged and a Span that does nothing, without
// allocating. Set attributes only when Recording, so that building them costs
// nothing when off.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, Span{}
	}
	ctx, s := parent.TracerProvider().Tracer("github.com/yuxi-serverless/yuxi").Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, Span{s}
}

// Recording reports whether the span records (telemetry is on).
func (s Span) Recording() bool { return s.s != nil }

// SetAttributes adds attributes.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(kv...)
	}
}

// End ends the span, marking it failed when err is not nil.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}

// Traceparent formats a span context as a W3C traceparent.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
}

// ParseTraceparent reads a W3C traceparent (version 00).
func ParseTraceparent(tp string) (trace.SpanContext, bool) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[3]) != 2 {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	if parts[3] == "01" {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}
