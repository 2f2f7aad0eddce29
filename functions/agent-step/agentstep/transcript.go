package agentstep

import (
	"context"
	"encoding/json"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// buildMessages turns the stored transcript into the model's messages: the
// system prompt, then each message, each assistant tool call followed by its
// result (so the transcript is always valid for the provider).
func buildMessages(systemPrompt string, entries []run.Entry) []llm.Message {
	out := make([]llm.Message, 0, len(entries)+1)
	if systemPrompt != "" {
		out = append(out, llm.Message{Role: llm.RoleSystem, Content: systemPrompt})
	}
	for _, e := range entries {
		switch e.Role {
		case "assistant":
			m := llm.Message{Role: llm.RoleAssistant, Content: e.Content}
			for _, c := range e.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: validJSONOrObject(c.Input)})
			}
			out = append(out, m)
			for _, c := range e.ToolCalls {
				out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: c.ResultText()})
			}
		case "user", "system":
			out = append(out, llm.Message{Role: e.Role, Content: e.Content})
		}
	}
	return out
}

// validJSONOrObject keeps the transcript acceptable to providers that reject
// malformed arguments in history (the model's own bad JSON is answered by
// the tool's error result).
func validJSONOrObject(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(map[string]string{"_raw": s})
	return string(b)
}

func toolSpecs(specs []tool.Spec) []llm.ToolSpec {
	out := make([]llm.ToolSpec, 0, len(specs))
	for _, s := range specs {
		out = append(out, llm.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	return out
}

// forward turns a model delta into `messages` chunks (contracts §3.7).
func (s *step) forward(ctx context.Context, b *runstream.Batcher, msgID string, d llm.Delta) error {
	r := s.r
	if d.Content != "" || d.Reasoning != "" {
		ev := runstream.MessageDelta{Type: runstream.StreamMessageDelta, MessageID: msgID, ThreadID: r.ThreadID,
			Content: d.Content, ReasoningContent: d.Reasoning}
		var response *string
		if d.Content != "" {
			response = &d.Content
		}
		if err := b.Add(ctx, textChunk{c: runstream.MessageChunk{RequestID: r.RequestID, Response: response, ThreadID: r.ThreadID,
			Status: runstream.ChunkLoading, StreamEvent: ev}, n: len(d.Content) + len(d.Reasoning)}); err != nil {
			return err
		}
	}
	for _, tc := range d.ToolCalls {
		ev := runstream.ToolCallDelta{Type: runstream.StreamToolCallDelta, MessageID: msgID, ToolCallID: tc.ID, Name: tc.Name,
			ArgsDelta: tc.ArgumentsDelta, Index: tc.Index}
		if err := b.Add(ctx, textChunk{c: runstream.MessageChunk{RequestID: r.RequestID, ThreadID: r.ThreadID,
			Status: runstream.ChunkLoading, StreamEvent: ev}, n: len(tc.ArgumentsDelta)}); err != nil {
			return err
		}
	}
	return nil
}

// textChunk tells the batcher how much text a chunk carries.
type textChunk struct {
	c runstream.MessageChunk
	n int
}

func (c textChunk) MarshalJSON() ([]byte, error) { return json.Marshal(c.c) }
func (c textChunk) TextLen() int                 { return c.n }

func toolCallChunk(r run.Run, msgID string, index int, tc llm.ToolCall) runstream.MessageChunk {
	var args any = map[string]any{}
	_ = json.Unmarshal([]byte(tc.Arguments), &args)
	return runstream.MessageChunk{RequestID: r.RequestID, ThreadID: r.ThreadID, Status: runstream.ChunkLoading,
		StreamEvent: runstream.ToolCall{Type: runstream.StreamToolCall, MessageID: msgID, ToolCallID: tc.ID, Name: tc.Name,
			Args: args, Index: index}}
}
