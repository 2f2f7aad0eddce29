package runstream

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/wire/*.json from the current types")

// wireCase is one run-stream event as a producer writes it: the typed
// payload, and the map its producer built before the payloads were typed
// (the wire must not change under clients).
type wireCase struct {
	name   string
	event  string
	typed  any
	legacy any
}

func wireCases() []wireCase {
	by := "run_parent"
	content := "Hel"
	output, errText, interrupt := "42", "boom", "ask_user_question_required"
	tool := func(data ToolEventData, legacyData map[string]any) (any, any) {
		data.ToolCallID, data.ToolName = "call_1", "calculator"
		legacyData["tool_call_id"], legacyData["tool_name"] = "call_1", "calculator"
		return Custom[ToolEventChunk]{Name: CustomStreamEvent, Chunk: ToolEventChunk{RequestID: "req_1", ThreadID: "th_1",
				Status: ChunkStreamEvent, Event: ToolEvent{Method: "tools", Data: data, ThreadID: "th_1"}}},
			map[string]any{"name": "yuxi.stream_event", "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": "stream_event",
				"event": map[string]any{"method": "tools", "namespace": "", "data": legacyData, "thread_id": "th_1"}}}
	}
	started, startedLegacy := tool(ToolEventData{Event: ToolStarted}, map[string]any{"event": "tool-started"})
	finished, finishedLegacy := tool(ToolEventData{Event: ToolFinished, Output: &output}, map[string]any{"event": "tool-finished", "output": output})
	failed, failedLegacy := tool(ToolEventData{Event: ToolFinished, Error: &errText}, map[string]any{"event": "tool-finished", "error": errText})
	asked, askedLegacy := tool(ToolEventData{Event: ToolFinished, Interrupt: &interrupt}, map[string]any{"event": "tool-finished", "interrupt": interrupt})
	questions := []json.RawMessage{json.RawMessage(`{"question":"Which city?","options":["Kyoto","Osaka"]}`)}

	return []wireCase{
		{"metadata", EventMetadata,
			Metadata{RequestID: "req_1", AgentSlug: "default-chatbot", UID: "alice", Source: "chat", RunType: "resume", CreatedByRunID: &by},
			map[string]any{"request_id": "req_1", "agent_slug": "default-chatbot", "uid": "alice", "source": "chat",
				"run_type": "resume", "created_by_run_id": &by, "subagent_slug": nil}},
		{"messages_message_delta", EventMessages,
			MessageChunk{RequestID: "req_1", Response: &content, ThreadID: "th_1", Status: ChunkLoading,
				StreamEvent: MessageDelta{Type: StreamMessageDelta, MessageID: "run_1:1:1:ab", ThreadID: "th_1", Content: content}},
			map[string]any{"request_id": "req_1", "response": content, "thread_id": "th_1", "status": "loading",
				"stream_event": map[string]any{"type": "message_delta", "message_id": "run_1:1:1:ab", "thread_id": "th_1", "namespace": "", "content": content}}},
		{"messages_reasoning_delta", EventMessages,
			MessageChunk{RequestID: "req_1", ThreadID: "th_1", Status: ChunkLoading,
				StreamEvent: MessageDelta{Type: StreamMessageDelta, MessageID: "run_1:1:1:ab", ThreadID: "th_1", ReasoningContent: "think"}},
			map[string]any{"request_id": "req_1", "response": nil, "thread_id": "th_1", "status": "loading",
				"stream_event": map[string]any{"type": "message_delta", "message_id": "run_1:1:1:ab", "thread_id": "th_1", "namespace": "", "reasoning_content": "think"}}},
		{"messages_tool_call_delta", EventMessages,
			MessageChunk{RequestID: "req_1", ThreadID: "th_1", Status: ChunkLoading,
				StreamEvent: ToolCallDelta{Type: StreamToolCallDelta, MessageID: "run_1:1:1:ab", ToolCallID: "call_1", Name: "calculator", ArgsDelta: `{"a"`, Index: 0}},
			map[string]any{"request_id": "req_1", "response": nil, "thread_id": "th_1", "status": "loading",
				"stream_event": map[string]any{"type": "tool_call_delta", "message_id": "run_1:1:1:ab", "tool_call_id": "call_1", "name": "calculator",
					"args_delta": `{"a"`, "index": 0}}},
		{"messages_tool_call", EventMessages,
			MessageChunk{RequestID: "req_1", ThreadID: "th_1", Status: ChunkLoading,
				StreamEvent: ToolCall{Type: StreamToolCall, MessageID: "run_1:1:1:ab", ToolCallID: "call_1", Name: "calculator", Args: map[string]any{"a": 1}, Index: 1}},
			map[string]any{"request_id": "req_1", "response": nil, "thread_id": "th_1", "status": "loading",
				"stream_event": map[string]any{"type": "tool_call", "message_id": "run_1:1:1:ab", "tool_call_id": "call_1", "name": "calculator",
					"args": map[string]any{"a": 1}, "index": 1}}},
		{"messages_batch", EventMessages,
			Messages{Items: []json.RawMessage{json.RawMessage(`{"status":"loading"}`)}},
			map[string]any{"items": []json.RawMessage{json.RawMessage(`{"status":"loading"}`)}}},
		{"custom_retry", EventCustom,
			Custom[Retry]{Name: CustomRetry, Chunk: Retry{RequestID: "req_1", ThreadID: "th_1", Status: ChunkRetry, StepNo: 2, Attempt: 3,
				DiscardMessagePrefix: "run_1:2:", CurrentMessageID: "run_1:2:3:cd", Reason: "model call failed: 502"}},
			map[string]any{"name": "yuxi.retry", "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": "retry", "step_no": 2,
				"attempt": 3, "discard_message_prefix": "run_1:2:", "current_message_id": "run_1:2:3:cd", "reason": "model call failed: 502"}}},
		{"custom_message_final", EventCustom,
			Custom[MessageFinal]{Name: CustomMessageFinal, Chunk: MessageFinal{RequestID: "req_1", ThreadID: "th_1", Status: ChunkMessageFinal,
				MessageID: "run_1:1:1:ab", DBMessageID: 17, StepNo: 1, ToolCallCount: 2}},
			map[string]any{"name": "yuxi.message_final", "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": "message_final",
				"message_id": "run_1:1:1:ab", "db_message_id": int64(17), "step_no": 1, "tool_call_count": 2}}},
		{"custom_tool_started", EventCustom, started, startedLegacy},
		{"custom_tool_finished", EventCustom, finished, finishedLegacy},
		{"custom_tool_error", EventCustom, failed, failedLegacy},
		{"custom_tool_interrupted", EventCustom, asked, askedLegacy},
		{"interrupt_cancelled", EventInterrupt,
			Interrupt[CancelChunk]{Reason: "cancelled", Chunk: CancelChunk{RequestID: "req_1", ThreadID: "th_1", Status: ChunkCancelled, Message: "the run was cancelled"}},
			map[string]any{"reason": "cancelled", "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": "cancelled", "message": "the run was cancelled"}}},
		{"interrupt_questions", EventInterrupt,
			Interrupt[QuestionsChunk]{Reason: interrupt, Chunk: QuestionsChunk{RequestID: "req_1", ThreadID: "th_1", Status: interrupt,
				Questions: questions, ToolCallIDs: []string{"call_1"}, Message: "Which city?", Source: "ask_user_question"}},
			map[string]any{"reason": interrupt, "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": interrupt,
				"questions": questions, "tool_call_ids": []string{"call_1"}, "message": "Which city?", "source": "ask_user_question"}}},
		{"interrupt_questions_none", EventInterrupt,
			Interrupt[QuestionsChunk]{Reason: interrupt, Chunk: QuestionsChunk{RequestID: "req_1", ThreadID: "th_1", Status: interrupt,
				Questions: []json.RawMessage{}, ToolCallIDs: []string{}, Source: "ask_user_question"}},
			map[string]any{"reason": interrupt, "chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": interrupt,
				"questions": []json.RawMessage{}, "tool_call_ids": []string{}, "message": "", "source": "ask_user_question"}}},
		{"error", EventError,
			Error{Chunk: ErrorChunk{RequestID: "req_1", ThreadID: "th_1", Status: ChunkError, ErrorType: "model_error", ErrorMessage: "upstream 500"}},
			map[string]any{"chunk": map[string]any{"request_id": "req_1", "thread_id": "th_1", "status": "error", "error_type": "model_error",
				"error_message": "upstream 500", "retryable": false}, "retryable": false}},
		{"end", EventEnd,
			End{Status: "completed", RequestID: "req_1"},
			map[string]any{"status": "completed", "request_id": "req_1"}},
		{"stream_failure", EventError,
			StreamFailure{RunID: "run_1", Message: "运行事件流暂时不可用，请重连", Reason: "redis_error"},
			map[string]string{"run_id": "run_1", "message": "运行事件流暂时不可用，请重连", "reason": "redis_error"}},
	}
}

// TestWireGolden pins the JSON of every run-stream event payload (and checks
// it is byte-identical to what the producers wrote before it was typed), and
// the envelope around it.
func TestWireGolden(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	for _, c := range wireCases() {
		t.Run(c.name, func(t *testing.T) {
			typed, err := marshalPayload(c.typed)
			if err != nil {
				t.Fatal(err)
			}
			legacy, err := json.Marshal(c.legacy)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(typed, legacy) {
				t.Fatalf("typed payload differs from the legacy wire:\n typed %s\nlegacy %s", typed, legacy)
			}
			env, err := BuildEnvelope("run_1", "th_1", c.event, c.typed, at)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, env, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden := filepath.Join("testdata", "wire", c.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("%s changed:\n got %s\nwant %s", golden, pretty.Bytes(), want)
			}
			var back Envelope
			if err := json.Unmarshal(env, &back); err != nil || back.SchemaVersion != SchemaVersion || back.Event != c.event {
				t.Fatalf("envelope %s: %+v %v", env, back, err)
			}
		})
	}
}
