package multiprocess

import (
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/telemetry/telemetrytest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, every function exports its spans to
// the collector, and one chat is one trace joined through the events'
// traceparent: intake's request → agent-step (the model asks for a tool) →
// tool-invoke → agent-step (the answer) → the dispatcher's run.finished,
// with the model and tool calls as GenAI spans and the user and thread as
// Langfuse attributes.
func TestOneTraceJoinsTheFunctionsOfAChat(t *testing.T) {
	col := telemetrytest.New(t)
	c := newCluster(t, testkit.Env{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL, "OTEL_BSP_SCHEDULE_DELAY": "100"})
	c.stack.LLM.Handle(func(req llmtest.ChatRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return llmtest.Text("noted")
		}
		return llmtest.Calls(llmtest.ToolCall{ID: "note", Name: "mark_for_improvement", Arguments: `{"reason":"traced"}`})
	})
	api := c.client(t)
	th := api.Thread()
	runID := api.Submit(th, "trace me", nil)["run_id"].(string)
	if r := testkit.Render(api.Collect(runID, 30*time.Second)); r.EndStatus != "completed" {
		t.Fatalf("run: %+v\n%s", r, c.logs())
	}

	// The spans arrive in batches; wait until the dispatcher's run.finished
	// span of this run's trace is in.
	var spans []telemetrytest.Span
	var trace string
	byID := map[string]telemetrytest.Span{}
	find := func(service, name string, pred func(telemetrytest.Span) bool) []telemetrytest.Span {
		var out []telemetrytest.Span
		for _, s := range spans {
			if s.TraceID == trace && s.Service == service && strings.Contains(s.Name, name) && (pred == nil || pred(s)) {
				out = append(out, s)
			}
		}
		return out
	}
	deadline := time.After(30 * time.Second)
	for {
		spans = col.Spans()
		for _, s := range spans {
			byID[s.SpanID] = s
			if s.Service == "agent-step" && s.Attrs["yuxi.run_id"] == runID {
				trace = s.TraceID
			}
		}
		if trace != "" && len(find("dispatcher", events.TypeRunFinished, nil)) > 0 && len(find("agent-step", events.TypeStepReady, nil)) >= 2 &&
			len(find("tool-invoke", events.TypeToolCallRequested, nil)) > 0 && len(find("intake", "POST", nil)) > 0 {
			break
		}
		select {
		case <-col.Wake():
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			var names []string
			for _, s := range spans {
				names = append(names, s.Service+": "+s.Name+" "+s.TraceID[:8]+"/"+s.SpanID[:8]+"←"+s.ParentSpanID)
			}
			t.Fatalf("no joined trace for run %s (trace %q); spans received: %v", runID, trace, names)
		}
	}
	// ancestor reports whether a is an ancestor of s in the trace.
	ancestor := func(a, s telemetrytest.Span) bool {
		for i := 0; i < 50 && s.ParentSpanID != "" && s.ParentSpanID != "0000000000000000"; i++ {
			p, ok := byID[s.ParentSpanID]
			if !ok {
				return false
			}
			if p.SpanID == a.SpanID {
				return true
			}
			s = p
		}
		return false
	}
	one := func(what string, ss []telemetrytest.Span) telemetrytest.Span {
		t.Helper()
		if len(ss) == 0 {
			var names []string
			for _, s := range spans {
				if s.TraceID == trace {
					names = append(names, s.Service+": "+s.Name)
				}
			}
			t.Fatalf("no %s span in trace %s; its spans: %v", what, trace, names)
		}
		return ss[0]
	}
	intake := one("intake request", find("intake", "POST", nil))
	steps := find("agent-step", events.TypeStepReady, nil)
	if len(steps) != 2 {
		t.Fatalf("agent-step spans in the trace: %d, want 2", len(steps))
	}
	first, second := steps[0], steps[1]
	if first.StartNano > second.StartNano {
		first, second = second, first
	}
	tool := one("tool-invoke", find("tool-invoke", events.TypeToolCallRequested, nil))
	finished := one("dispatcher run.finished", find("dispatcher", events.TypeRunFinished, nil))
	for _, hop := range []struct {
		name         string
		parent, span telemetrytest.Span
	}{
		{"intake → agent-step", intake, first},
		{"agent-step → tool-invoke", first, tool},
		{"tool-invoke → agent-step", tool, second},
		{"agent-step → dispatcher", second, finished},
	} {
		if !ancestor(hop.parent, hop.span) {
			t.Errorf("%s: %s (%s) does not descend from %s (%s)", hop.name, hop.span.Name, hop.span.SpanID, hop.parent.Name, hop.parent.SpanID)
		}
	}
	model := one("model call", find("agent-step", "chat ", func(s telemetrytest.Span) bool { return ancestor(first, s) }))
	if model.Attrs["gen_ai.operation.name"] != "chat" || model.Attrs["gen_ai.request.model"] == nil || model.Attrs["gen_ai.response.finish_reasons"] == nil {
		t.Errorf("model span attributes: %v", model.Attrs)
	}
	exec := one("tool call", find("tool-invoke", "execute_tool mark_for_improvement", nil))
	if !ancestor(tool, exec) || exec.Attrs["gen_ai.tool.call.id"] == nil || exec.Attrs["langfuse.session.id"] != th {
		t.Errorf("tool span: parent %s, attributes %v", exec.ParentSpanID, exec.Attrs)
	}
	if first.Attrs["langfuse.session.id"] != th || first.Attrs["langfuse.user.id"] == nil {
		t.Errorf("agent-step span lacks the Langfuse user/session: %v", first.Attrs)
	}
	// RED metrics are exported too.
	for deadline := time.Now().Add(10 * time.Second); col.MetricPoints("yuxi.invocations") == 0 || col.MetricPoints("yuxi.invocation.duration") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no RED metrics exported")
		}
		select {
		case <-col.Wake():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
