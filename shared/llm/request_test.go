package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestRequestIsSentAsWritten(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Text("done"))
	schema := `{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`
	req := llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are Yuxi."},
			{Role: llm.RoleUser, Content: "search go", Name: "alice"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "search", Arguments: `{"q":"go"}`}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "Go is a language."},
		},
		Tools: []llm.ToolSpec{{Name: "search", Description: "Search the web", Parameters: json.RawMessage(schema)}},
	}
	if _, err := fakeModel(t, s, "YUXI_PROVIDER_FAKE_API_KEY=sk-test").Stream(testCtx(t), req, nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	got := s.Requests()[0]
	if got.Model != "test-model" || !got.Stream {
		t.Errorf("model=%q stream=%v", got.Model, got.Stream)
	}
	if got.Authorization != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got.Authorization)
	}
	if len(got.Messages) != 4 {
		t.Fatalf("messages = %+v", got.Messages)
	}
	if m := got.Messages[1]; m.Role != "user" || m.Content != "search go" || m.Name != "alice" {
		t.Errorf("user message = %+v", m)
	}
	if m := got.Messages[2]; m.HasContent || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].ID != "c1" || m.ToolCalls[0].Name != "search" || m.ToolCalls[0].Arguments != `{"q":"go"}` {
		t.Errorf("assistant message = %+v", m)
	}
	if m := got.Messages[3]; m.Role != "tool" || m.ToolCallID != "c1" || m.Content != "Go is a language." {
		t.Errorf("tool message = %+v", m)
	}
	if len(got.Tools) != 1 || got.Tools[0].Name != "search" || got.Tools[0].Description != "Search the web" ||
		string(got.Tools[0].Parameters) != schema {
		t.Errorf("tools = %+v (parameters %s)", got.Tools, got.Tools[0].Parameters)
	}
}

func TestNoAuthorizationHeaderWithoutKey(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Text("local"))
	if _, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if a := s.Requests()[0].Authorization; a != "" {
		t.Errorf("Authorization = %q, want none", a)
	}
}

func TestInvalidRequestsAreRejectedBeforeSending(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	m := fakeModel(t, s)
	cases := map[string]llm.Request{
		"unknown role":     {Messages: []llm.Message{{Role: "wizard", Content: "x"}}},
		"no messages":      {},
		"tool without id":  {Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}},
		"call without id":  {Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "f", Arguments: "{}"}}}}},
		"schema not a map": {Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}}, Tools: []llm.ToolSpec{{Name: "f", Parameters: json.RawMessage(`[1]`)}}},
	}
	for name, req := range cases {
		_, err := m.Stream(testCtx(t), req, nil)
		fe, ok := failure.As(err)
		if !ok || fe.Kind != failure.KindInvalid || llm.IsRetryable(err) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d invalid requests reached the provider", n)
	}
}
