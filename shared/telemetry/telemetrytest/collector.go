// Package telemetrytest is an in-test OpenTelemetry collector: an OTLP/HTTP
// receiver (protobuf, as the exporters shared/telemetry configures send)
// that keeps the spans it receives and counts metric exports.
//
// Imported by: tests and benchmarks.
// May import: the standard library, go.opentelemetry.io/proto and google.golang.org/protobuf.
package telemetrytest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span.
type Span struct {
	Service            string
	TraceID, SpanID    string
	ParentSpanID       string
	Name               string
	Kind               int32
	Attrs              map[string]any
	StartNano, EndNano uint64
	StatusCode         int32
}

// Collector receives OTLP/HTTP exports.
type Collector struct {
	URL string // the base URL: OTEL_EXPORTER_OTLP_ENDPOINT
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	metrics map[string]int // metric name → data points received
	wake    chan struct{}
}

// New starts a collector, closed with t.
func New(t testing.TB) *Collector {
	c := Start()
	t.Cleanup(c.Close)
	return c
}

// Start starts a collector; Close stops it.
func Start() *Collector {
	c := &Collector{metrics: map[string]int{}, wake: make(chan struct{}, 1)}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	c.URL = c.srv.URL
	return c
}

// Close stops the collector.
func (c *Collector) Close() { c.srv.Close() }

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want an application/x-protobuf body", http.StatusUnsupportedMediaType)
		return
	}
	switch r.URL.Path {
	case "/v1/traces":
		var req colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			service, _ := attrMap(rs.GetResource().GetAttributes())["service.name"].(string)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, Span{
						Service: service, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
						ParentSpanID: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Kind: int32(s.Kind),
						Attrs: attrMap(s.Attributes), StartNano: s.StartTimeUnixNano, EndNano: s.EndTimeUnixNano,
						StatusCode: int32(s.GetStatus().GetCode()),
					})
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&colltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	case "/v1/metrics":
		var req collmetric.ExportMetricsServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					n := len(m.GetSum().GetDataPoints()) + len(m.GetHistogram().GetDataPoints()) + len(m.GetGauge().GetDataPoints())
					c.metrics[m.Name] += n
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&collmetric.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	default:
		http.NotFound(w, r)
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// MetricPoints returns how many data points of the named metric arrived.
func (c *Collector) MetricPoints(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.metrics[name]
}

// Wake is signalled after every export received.
func (c *Collector) Wake() <-chan struct{} { return c.wake }

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = anyValue(kv.Value)
	}
	return out
}

func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, anyValue(e))
		}
		return out
	}
	return nil
}
