package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestStreamAssemblesParallelToolCallsFromFragments(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{
		Chunks: []llmtest.Chunk{{Content: "Let me look."}},
		ToolCalls: []llmtest.ToolCall{
			{ID: "call_a", Name: "search", Fragments: []string{`{"query"`, `: "serverless`, ` go"}`}},
			{ID: "call_b", Name: "calculator", Fragments: []string{`{"expr":`, ` "6*7"}`}},
		},
		InterleaveToolCalls: true, // call 0 and call 1 fragments alternate across chunks
	})
	m := fakeModel(t, s)

	var fragments []llm.ToolCallDelta
	req := userTurn("find it")
	req.Tools = []llm.ToolSpec{
		{Name: "search", Description: "web search", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
		{Name: "calculator", Parameters: json.RawMessage(`{"type":"object","properties":{"expr":{"type":"string"}}}`)},
	}
	resp, err := m.Stream(testCtx(t), req, func(d llm.Delta) error {
		fragments = append(fragments, d.ToolCalls...)
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []llm.ToolCall{
		{ID: "call_a", Name: "search", Arguments: `{"query": "serverless go"}`},
		{ID: "call_b", Name: "calculator", Arguments: `{"expr": "6*7"}`},
	}
	if len(resp.ToolCalls) != len(want) {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	for i := range want {
		if resp.ToolCalls[i] != want[i] {
			t.Errorf("tool call %d = %+v, want %+v", i, resp.ToolCalls[i], want[i])
		}
		if !json.Valid([]byte(resp.ToolCalls[i].Arguments)) {
			t.Errorf("tool call %d arguments are not JSON: %s", i, resp.ToolCalls[i].Arguments)
		}
	}
	if resp.FinishReason != "tool_calls" || resp.Content != "Let me look." {
		t.Errorf("finish=%q content=%q", resp.FinishReason, resp.Content)
	}
	// The fragments were delivered one by one, interleaved, as they arrived.
	if len(fragments) != 5 {
		t.Fatalf("fragments = %+v", fragments)
	}
	order := []int{0, 1, 0, 1, 0}
	for i, f := range fragments {
		if f.Index != order[i] {
			t.Errorf("fragment %d index = %d, want %d", i, f.Index, order[i])
		}
	}
	if fragments[0].ID != "call_a" || fragments[0].Name != "search" || fragments[2].Name != "" {
		t.Errorf("id and name should come with the first fragment only: %+v", fragments)
	}

	// The transcript goes back to the model with the tool results; the fake
	// checks it is well-formed (every call answered, ids matching).
	s.Enqueue(llmtest.Text("42 results"))
	next := req
	next.Messages = append(next.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_b", Content: "42"},
		llm.Message{Role: llm.RoleTool, ToolCallID: "call_a", Content: "found"},
	)
	if _, err := m.Stream(testCtx(t), next, nil); err != nil {
		t.Fatalf("second turn: %v", err)
	}
	got := s.Requests()[1].Messages
	if len(got) != 4 || got[1].Role != "assistant" || len(got[1].ToolCalls) != 2 ||
		got[1].ToolCalls[0].Arguments != want[0].Arguments || got[2].ToolCallID != "call_b" {
		t.Errorf("second request messages = %+v", got)
	}
}

func TestStreamGivesIDlessToolCallsStableIDs(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Calls(
		llmtest.ToolCall{Name: "a", Arguments: `{}`, OmitID: true},
		llmtest.ToolCall{Name: "b", Arguments: `{"x":1}`, OmitID: true},
	))
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("go"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "call_0" || resp.ToolCalls[1].ID != "call_1" ||
		resp.ToolCalls[1].Arguments != `{"x":1}` {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
}
