package llmtest

import (
	"net/http"
	"time"
)

// Reply scripts the server's answer to one chat completion request.
//
// A streamed reply is written as one chunk per Chunks entry, then one chunk
// per tool call fragment, then a chunk carrying finish_reason, then (when the
// request asked for stream_options.include_usage) a usage chunk with empty
// choices, then "data: [DONE]". The first chunk also carries role
// "assistant". Every chunk is flushed on its own.
type Reply struct {
	// Chunks are streamed in order: text and reasoning pieces.
	Chunks []Chunk
	// ToolCalls are streamed after Chunks, index i for ToolCalls[i].
	ToolCalls []ToolCall
	// InterleaveToolCalls streams the calls' fragments round-robin (call 0
	// fragment 0, call 1 fragment 0, call 0 fragment 1, …) instead of one
	// call after the other.
	InterleaveToolCalls bool
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string
	// Usage is reported when the request asks for it (and always in
	// non-streaming answers). Nil means a rough estimate (characters / 4).
	Usage *Usage
	// NoUsage makes the server behave like a provider that never reports
	// usage, even when asked.
	NoUsage bool
	// Delay is waited before every streamed chunk whose own Delay is zero.
	Delay time.Duration

	// Block, when not nil, holds the answer until it is closed (or the
	// client goes away, or the server closes): a stream is held after its
	// headers and its first BlockAfter chunks; other answers are held before
	// anything is written.
	Block      <-chan struct{}
	BlockAfter int

	// Disconnect drops the connection mid-stream, after DisconnectAfter
	// chunks, without finishing the HTTP response (the client sees an
	// unexpected EOF).
	Disconnect      bool
	DisconnectAfter int

	// StreamError, when set, ends the stream after the chunks with an error
	// event `data: {"error":{"message":…}}` instead of a finish_reason.
	StreamError string

	// Status >= 400 answers with that HTTP status and an OpenAI-style error
	// body carrying Error as its message; nothing is streamed.
	Status int
	Error  string

	// Header is added to the response (e.g. Retry-After).
	Header http.Header
}

// Chunk is one streamed piece of text and/or reasoning.
type Chunk struct {
	Content   string
	Reasoning string // sent as delta.reasoning_content
	Delay     time.Duration
}

// ToolCall is a function call, as scripted in a Reply or as received in an
// assistant message of a request.
type ToolCall struct {
	ID        string // empty in a Reply: the server makes one up ("call_<request>_<index>")
	Name      string
	Arguments string // JSON text
	// Fragments, when set in a Reply, are streamed in place of Arguments, one
	// chunk each; their concatenation is the arguments text.
	Fragments []string
	// OmitID streams the call without any id, as some providers do.
	OmitID bool
}

// Usage is a token count, as in the OpenAI usage object.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"` // 0: the sum of the other two
	// PromptTokensDetails, when set, reports cached input tokens.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// Text is a reply streaming parts as separate content chunks.
func Text(parts ...string) Reply {
	r := Reply{}
	for _, p := range parts {
		r.Chunks = append(r.Chunks, Chunk{Content: p})
	}
	return r
}

// Calls is a reply asking for tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Fail is a reply answering with an HTTP error status.
func Fail(status int, message string) Reply { return Reply{Status: status, Error: message} }
