// Package llm is the model capability: it streams chat completions from any
// OpenAI-compatible endpoint and knows the provider templates of the original
// product (OpenAI, DeepSeek, DashScope, SiliconFlow, …), the
// "provider_id:model_id" model spec, the extra_body whitelist and which
// provider failures are worth retrying.
//
// Contracts:
//   - Stream makes exactly one HTTP request and never retries. The caller
//     (agent-step) owns retries and asks IsRetryable. Model calls are
//     at-least-once: a retried turn may repeat tokens the client already saw.
//   - Configuration comes in as an environ slice (LoadRegistry); this package
//     never reads the process environment itself.
//
// Imported by: functions that call models (agent-step, evaluate, kb-index for
// graph extraction) and shared domain packages that build model requests.
// May import: the standard library, openai-go, shared/failure, shared/telemetry. Tests use
// shared/llm/llmtest (a scripted fake provider) and never a real provider.
package llm

import (
	"context"
	"encoding/json"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of a chat transcript.
type Message struct {
	Role       string     `json:"role"` // system | user | assistant | tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant only
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool only: which call this answers
	Name       string     `json:"name,omitempty"`         // optional participant name (user, assistant)
}

// ToolCall is a function call requested by the model.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // raw JSON text, as produced by the model
}

// ToolSpec declares a function the model may call.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON Schema object; sent byte for byte
}

// Request is one model turn.
type Request struct {
	// Model is the provider's model id, without the "provider:" prefix.
	// A ChatModel obtained from Registry.ChatModel fills it when empty.
	Model    string
	Messages []Message
	Tools    []ToolSpec
	// ExtraBody is merged into the top level of the HTTP request body. Only
	// the keys listed by ExtraBodyKeys are accepted; anything else makes
	// Stream fail before any request is sent.
	ExtraBody map[string]any
	// MaxTokens, when positive, caps the answer (sent as max_tokens): a
	// call under a token budget is sent with its reservation's output cap.
	MaxTokens int64
}

// ToolCallDelta is a fragment of a tool call as streamed by the provider.
// Index identifies the call within the turn; ID and Name usually arrive only
// with the first fragment of a call.
type ToolCallDelta struct {
	Index          int
	ID             string
	Name           string
	ArgumentsDelta string
}

// Delta is what one streamed chunk added.
type Delta struct {
	Content string
	// Reasoning is the non-standard reasoning_content (DeepSeek, SiliconFlow,
	// DashScope, …) or reasoning (OpenRouter) text of the chunk.
	Reasoning string
	ToolCalls []ToolCallDelta
}

// Empty reports whether the delta carries nothing.
func (d Delta) Empty() bool {
	return d.Content == "" && d.Reasoning == "" && len(d.ToolCalls) == 0
}

// Usage is the token accounting of one turn. Reported is false when the
// provider sent no usage (the numbers are then zero, not estimates).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	Reported     bool  `json:"reported"`
	// CacheReadTokens are the input tokens the provider served from its
	// prompt cache (prompt_tokens_details.cached_tokens); CacheReported is
	// false when the provider did not report the field (not a zero hit).
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	CacheReported   bool  `json:"cache_reported,omitempty"`
}

// Response is the assembled result of one turn.
type Response struct {
	Content   string
	Reasoning string
	// ToolCalls are assembled from their fragments and ordered by stream
	// index. A call the provider sent without an id gets "call_<index>";
	// callers that need globally unique ids renumber them.
	ToolCalls    []ToolCall
	FinishReason string
	Usage        Usage
}

// ChatModel streams one model turn.
//
// Stream calls onDelta for every streamed chunk that carries content,
// reasoning or tool call fragments, as the chunk arrives (nothing is
// buffered), and returns the assembled response once the provider ends the
// stream. If onDelta returns an error the stream is abandoned and that error
// is returned as is. On any error the returned Response holds what had
// arrived before it (useful for logs; not a usable answer). Stream does not
// retry; see IsRetryable.
type ChatModel interface {
	Stream(ctx context.Context, req Request, onDelta func(Delta) error) (Response, error)
}

// Ask sends one system and one user message to model (modelID as in
// Request.Model) and returns the whole reply, streamed to no one: the
// prompt-and-answer calls of the model-made helpers (sample questions,
// descriptions, mind maps).
func Ask(ctx context.Context, model ChatModel, modelID, system, user string) (Response, error) {
	return model.Stream(ctx, Request{Model: modelID, Messages: []Message{
		{Role: RoleSystem, Content: system}, {Role: RoleUser, Content: user}}}, func(Delta) error { return nil })
}
