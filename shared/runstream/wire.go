package runstream

import "encoding/json"

// The payloads of run-stream events (contracts §3.7), as their producers
// write them. Each is the `payload` of an Envelope, whose schema_version
// (SchemaVersion) versions these shapes: a change a client could not ignore
// is a new version.
//
// The JSON must not change under clients: fields are declared in the
// alphabetical order of their names, the order the map-built payloads these
// types replace were encoded in, and testdata/wire/*.json pins every event
// (go test ./shared/runstream -run TestWireGolden -update rewrites them).

// Names of `custom` events.
const (
	CustomRetry        = "yuxi.retry"
	CustomMessageFinal = "yuxi.message_final"
	CustomStreamEvent  = "yuxi.stream_event"
)

// Chunk statuses.
const (
	ChunkLoading      = "loading"
	ChunkRetry        = "retry"
	ChunkMessageFinal = "message_final"
	ChunkStreamEvent  = "stream_event"
	ChunkCancelled    = "cancelled"
	ChunkError        = "error"
)

// Metadata is the payload of the run's first event, `metadata` (keyed
// "metadata": written once per run).
type Metadata struct {
	AgentSlug      string  `json:"agent_slug"`
	CreatedByRunID *string `json:"created_by_run_id"`
	RequestID      string  `json:"request_id"`
	RunType        string  `json:"run_type"`
	Source         string  `json:"source"`
	SubagentSlug   *string `json:"subagent_slug"`
	UID            string  `json:"uid"`
}

// Messages is the payload of a `messages` event: a batch of chunks, written
// by Batcher.
type Messages struct {
	Items []json.RawMessage `json:"items"`
}

// Types of MessageChunk.StreamEvent.
const (
	StreamMessageDelta  = "message_delta"
	StreamToolCallDelta = "tool_call_delta"
	StreamToolCall      = "tool_call"
)

// MessageChunk is one item of a `messages` event: a model delta or a
// complete tool call, under the attempt-scoped message id.
type MessageChunk struct {
	RequestID string `json:"request_id"`
	// Response repeats the delta's content (null when it has none).
	Response    *string     `json:"response"`
	Status      string      `json:"status"` // ChunkLoading
	StreamEvent StreamEvent `json:"stream_event"`
	ThreadID    string      `json:"thread_id"`
}

// StreamEvent is MessageDelta, ToolCallDelta or ToolCall.
type StreamEvent interface{ streamEvent() }

// MessageDelta is streamed text or reasoning.
type MessageDelta struct {
	Content          string `json:"content,omitempty"`
	MessageID        string `json:"message_id"`
	Namespace        string `json:"namespace"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	ThreadID         string `json:"thread_id"`
	Type             string `json:"type"` // StreamMessageDelta
}

// ToolCallDelta is a streamed piece of a tool call's arguments.
type ToolCallDelta struct {
	ArgsDelta  string `json:"args_delta"`
	Index      int    `json:"index"`
	MessageID  string `json:"message_id"`
	Name       string `json:"name"`
	ToolCallID string `json:"tool_call_id"`
	Type       string `json:"type"` // StreamToolCallDelta
}

// ToolCall is a complete tool call, sent when the model turn ends.
type ToolCall struct {
	Args       any    `json:"args"` // the parsed arguments ({} when they are not JSON)
	Index      int    `json:"index"`
	MessageID  string `json:"message_id"`
	Name       string `json:"name"`
	ToolCallID string `json:"tool_call_id"`
	Type       string `json:"type"` // StreamToolCall
}

func (MessageDelta) streamEvent()  {}
func (ToolCallDelta) streamEvent() {}
func (ToolCall) streamEvent()      {}

// Custom is the payload of a `custom` event: a named chunk.
type Custom[C any] struct {
	Chunk C      `json:"chunk"`
	Name  string `json:"name"` // CustomRetry, CustomMessageFinal, CustomStreamEvent
}

// Retry (yuxi.retry) tells clients that a step starts over: every message of
// the step (ids starting with DiscardMessagePrefix) except CurrentMessageID is
// to be discarded, including late deltas of an abandoned attempt.
type Retry struct {
	Attempt              int    `json:"attempt"`
	CurrentMessageID     string `json:"current_message_id"`
	DiscardMessagePrefix string `json:"discard_message_prefix"`
	Reason               string `json:"reason"`
	RequestID            string `json:"request_id"`
	Status               string `json:"status"` // ChunkRetry
	StepNo               int    `json:"step_no"`
	ThreadID             string `json:"thread_id"`
}

// MessageFinal (yuxi.message_final) marks a step's message as committed.
type MessageFinal struct {
	DBMessageID   int64  `json:"db_message_id"`
	MessageID     string `json:"message_id"`
	RequestID     string `json:"request_id"`
	Status        string `json:"status"` // ChunkMessageFinal
	StepNo        int    `json:"step_no"`
	ThreadID      string `json:"thread_id"`
	ToolCallCount int    `json:"tool_call_count"`
}

// ToolEventChunk (yuxi.stream_event) carries a tool call's progress.
type ToolEventChunk struct {
	Event     ToolEvent `json:"event"`
	RequestID string    `json:"request_id"`
	Status    string    `json:"status"` // ChunkStreamEvent
	ThreadID  string    `json:"thread_id"`
}

// ToolEvent is the event of a ToolEventChunk.
type ToolEvent struct {
	Data      ToolEventData `json:"data"`
	Method    string        `json:"method"` // "tools"
	Namespace string        `json:"namespace"`
	ThreadID  string        `json:"thread_id"`
}

// Tool event kinds.
const (
	ToolStarted  = "tool-started"
	ToolFinished = "tool-finished"
)

// ToolEventData is what happened to one tool call. A finished call carries
// exactly one of Output (success), Error (error) and Interrupt (the call
// waits for the user).
type ToolEventData struct {
	Error      *string `json:"error,omitempty"`
	Event      string  `json:"event"` // ToolStarted, ToolFinished
	Interrupt  *string `json:"interrupt,omitempty"`
	Output     *string `json:"output,omitempty"`
	ToolCallID string  `json:"tool_call_id"`
	ToolName   string  `json:"tool_name"`
}

// Interrupt is the payload of an `interrupt` event (keyed "interrupt"):
// CancelChunk for a cancelled run, QuestionsChunk for a run that waits for
// the user's answer.
type Interrupt[C any] struct {
	Chunk  C      `json:"chunk"`
	Reason string `json:"reason"`
}

// CancelChunk is the chunk of a cancelled run's interrupt.
type CancelChunk struct {
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Status    string `json:"status"` // ChunkCancelled
	ThreadID  string `json:"thread_id"`
}

// QuestionsChunk is the chunk of an interrupted run's interrupt.
type QuestionsChunk struct {
	// Approval, for a run waiting for tool approvals (status
	// human_approval_required): {action_requests, review_configs, expires_at}.
	Approval    json.RawMessage   `json:"approval,omitempty"`
	Message     string            `json:"message"`
	Questions   []json.RawMessage `json:"questions"`
	RequestID   string            `json:"request_id"`
	Source      string            `json:"source"` // "ask_user_question", or "tool_approval"
	Status      string            `json:"status"` // the interrupt kind (the run's error_type)
	ThreadID    string            `json:"thread_id"`
	ToolCallIDs []string          `json:"tool_call_ids"`
}

// Error is the payload of a failed run's `error` event (keyed "error").
type Error struct {
	Chunk     ErrorChunk `json:"chunk"`
	Retryable bool       `json:"retryable"`
}

// ErrorChunk is the chunk of an Error.
type ErrorChunk struct {
	ErrorMessage string `json:"error_message"`
	ErrorType    string `json:"error_type"`
	RequestID    string `json:"request_id"`
	Retryable    bool   `json:"retryable"`
	Status       string `json:"status"` // ChunkError
	ThreadID     string `json:"thread_id"`
}

// End is the payload of the run's last event, `end` (keyed "end"), also sent
// as the synthetic end of a finished run whose end is not in its stream.
type End struct {
	RequestID string `json:"request_id"`
	Status    string `json:"status"` // the run's terminal status
}

// StreamFailure is the payload of the `error` event the SSE server sends (not
// stored) when it cannot read the stream.
type StreamFailure struct {
	Message string `json:"message"`
	Reason  string `json:"reason"` // "redis_error"
	RunID   string `json:"run_id"`
}

// QueueChange is the payload of a thread's queue stream entry: it wakes
// request-SSE clients, which then read the queue from Postgres.
type QueueChange struct {
	Change string `json:"change"`
}
