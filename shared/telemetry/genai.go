package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Who a run belongs to: the attributes Langfuse reads (langfuse.user.id,
// langfuse.session.id; the session is the thread, as the original's Langfuse
// integration groups a conversation) and their OpenTelemetry equivalents.
type Who struct {
	UserID, ThreadID, RunID, Agent string
}

func (w Who) attrs() []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 8)
	if w.UserID != "" {
		kv = append(kv, attribute.String("user.id", w.UserID), attribute.String("langfuse.user.id", w.UserID))
	}
	if w.ThreadID != "" {
		kv = append(kv, attribute.String("session.id", w.ThreadID), attribute.String("langfuse.session.id", w.ThreadID),
			attribute.String("gen_ai.conversation.id", w.ThreadID), attribute.String("yuxi.thread_id", w.ThreadID))
	}
	if w.RunID != "" {
		kv = append(kv, attribute.String("yuxi.run_id", w.RunID))
	}
	if w.Agent != "" {
		kv = append(kv, attribute.String("gen_ai.agent.name", w.Agent))
	}
	return kv
}

// StartModelCall starts a GenAI "chat" span for one model call.
func StartModelCall(ctx context.Context, provider, model string, who Who) (context.Context, Span) {
	if !recording(ctx) {
		return ctx, Span{}
	}
	ctx, s := Start(ctx, "chat "+model, trace.SpanKindClient)
	if s.Recording() {
		s.SetAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.system", provider),
			attribute.String("gen_ai.provider.name", provider), attribute.String("gen_ai.request.model", model),
			attribute.String("langfuse.observation.type", "generation"))
		s.SetAttributes(who.attrs()...)
	}
	return ctx, s
}

// ModelResult records a model call's outcome on its span.
func (s Span) ModelResult(responseModel string, inputTokens, outputTokens int64, finishReason string) {
	if !s.Recording() {
		return
	}
	kv := []attribute.KeyValue{attribute.Int64("gen_ai.usage.input_tokens", inputTokens), attribute.Int64("gen_ai.usage.output_tokens", outputTokens)}
	if responseModel != "" {
		kv = append(kv, attribute.String("gen_ai.response.model", responseModel))
	}
	if finishReason != "" {
		kv = append(kv, attribute.StringSlice("gen_ai.response.finish_reasons", []string{finishReason}))
	}
	s.SetAttributes(kv...)
}

// StartToolCall starts a GenAI "execute_tool" span for one tool call.
func StartToolCall(ctx context.Context, tool, callID string, who Who) (context.Context, Span) {
	if !recording(ctx) {
		return ctx, Span{}
	}
	ctx, s := Start(ctx, "execute_tool "+tool, trace.SpanKindInternal)
	if s.Recording() {
		s.SetAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.call.id", callID), attribute.String("langfuse.observation.type", "tool"))
		s.SetAttributes(who.attrs()...)
	}
	return ctx, s
}

// StartRetrieval starts a span for a knowledge-base retrieval.
func StartRetrieval(ctx context.Context, kbID string, topK int) (context.Context, Span) {
	if !recording(ctx) {
		return ctx, Span{}
	}
	ctx, s := Start(ctx, "retrieve "+kbID, trace.SpanKindInternal)
	if s.Recording() {
		s.SetAttributes(attribute.String("gen_ai.operation.name", "retrieval"), attribute.String("yuxi.kb_id", kbID),
			attribute.Int("yuxi.top_k", topK), attribute.String("langfuse.observation.type", "retriever"))
	}
	return ctx, s
}

// StartStore starts a span for a heavy store call (op names the statement
// group, e.g. "run.load_checkpoint").
func StartStore(ctx context.Context, op string) (context.Context, Span) {
	ctx, s := Start(ctx, op, trace.SpanKindClient)
	if s.Recording() {
		s.SetAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.operation.name", op))
	}
	return ctx, s
}

// Annotate adds who's attributes to the span in ctx (the invocation), when
// it records: Langfuse takes the trace's user and session from them.
func Annotate(ctx context.Context, who Who) {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		s.SetAttributes(who.attrs()...)
	}
}

// recording reports whether the span in ctx records, before any span name or
// attribute is built.
func recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }
