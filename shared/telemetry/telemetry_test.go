package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Off (no endpoint), the hot path's telemetry calls allocate nothing: the
// invocation edges hold a nil *Telemetry and child spans start only under a
// recording parent.
func TestOffAllocatesNothing(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Service: "agent-step"})
	if err != nil || tel != nil {
		t.Fatalf("Setup without an endpoint: %v %v, want nil (off)", tel, err)
	}
	ctx := events.WithTraceparent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	who := telemetry.Who{UserID: "u1", ThreadID: "t1", RunID: "r1", Agent: "default"}
	allocs := testing.AllocsPerRun(1000, func() {
		c, inv := tel.StartEvent(ctx, events.TypeStepReady, "id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		telemetry.Annotate(c, who)
		mc, model := telemetry.StartModelCall(c, "openai", "gpt-x", who)
		model.ModelResult("gpt-x", 10, 20, "stop")
		model.End(nil)
		_, tool := telemetry.StartToolCall(mc, "calculator", "call_1", who)
		tool.End(nil)
		_, r := telemetry.StartRetrieval(c, "kb_1", 5)
		r.End(nil)
		_, st := telemetry.StartStore(c, "run.claim")
		st.End(nil)
		inv.End("ack", false, nil)
		tel.Flush(c)
	})
	if allocs != 0 {
		t.Fatalf("telemetry off: %v allocations per invocation, want 0", allocs)
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	t.Parallel()
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := telemetry.ParseTraceparent(tp)
	if !ok || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("parse %q: %v %v", tp, sc, ok)
	}
	if got := telemetry.Traceparent(sc); got != tp {
		t.Errorf("format: %q, want %q", got, tp)
	}
	for _, bad := range []string{"", "00-0-0-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"} {
		if _, ok := telemetry.ParseTraceparent(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
	if telemetry.Traceparent(trace.SpanContext{}) != "" {
		t.Error("an invalid span context has no traceparent")
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	h, err := telemetry.ParseHeaders("Authorization=Basic%20cGs6c2s=, x-langfuse-ingestion-version=4")
	if err != nil || h["Authorization"] != "Basic cGs6c2s=" || h["x-langfuse-ingestion-version"] != "4" {
		t.Fatalf("%v %v", h, err)
	}
	if _, err := telemetry.ParseHeaders("novalue"); err == nil {
		t.Error("accepted a header without =")
	}
}
