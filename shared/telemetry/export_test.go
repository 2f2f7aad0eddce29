package telemetry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/telemetry/telemetrytest"
)

// On, an invocation continues the event's trace, puts its own span in ctx
// for the events the handler writes, and its children are exported under it
// with the GenAI and Langfuse attributes.
func TestOnExportsLinkedSpans(t *testing.T) {
	t.Parallel()
	col := telemetrytest.New(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Service: "agent-step", Endpoint: col.URL})
	if err != nil || tel == nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, inv := tel.StartEvent(context.Background(), events.TypeStepReady, "ev1", parent)
	out := events.TraceparentFrom(ctx)
	if out == parent || out[:35] != parent[:35] {
		t.Fatalf("outgoing traceparent %q: want the same trace, this span", out)
	}
	telemetry.Annotate(ctx, telemetry.Who{UserID: "u1", ThreadID: "t1", RunID: "r1"})
	_, model := telemetry.StartModelCall(ctx, "openai", "gpt-x", telemetry.Who{})
	model.ModelResult("gpt-x", 11, 22, "tool_calls")
	model.End(nil)
	inv.End("retry", true, errors.New("db down"))
	tel.Flush(context.Background())
	spans := col.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2", len(spans))
	}
	var invSpan, modelSpan telemetrytest.Span
	for _, s := range spans {
		if s.Name == "chat gpt-x" {
			modelSpan = s
		} else {
			invSpan = s
		}
	}
	if invSpan.ParentSpanID != "00f067aa0ba902b7" || invSpan.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || invSpan.Service != "agent-step" ||
		invSpan.Attrs["langfuse.user.id"] != "u1" || invSpan.Attrs["langfuse.session.id"] != "t1" || invSpan.StatusCode != 2 {
		t.Errorf("invocation span: %+v", invSpan)
	}
	if modelSpan.ParentSpanID != invSpan.SpanID || modelSpan.Attrs["gen_ai.usage.input_tokens"] != int64(11) ||
		modelSpan.Attrs["gen_ai.usage.output_tokens"] != int64(22) || modelSpan.Attrs["gen_ai.request.model"] != "gpt-x" {
		t.Errorf("model span: %+v", modelSpan)
	}
	if col.MetricPoints("yuxi.invocations") == 0 && col.MetricPoints("yuxi.invocation.errors") == 0 {
		t.Error("no RED metrics exported on flush")
	}
}
