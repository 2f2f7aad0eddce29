package compaction_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

func TestEstimateCountsASCIIByQuartersAndOtherCharactersWhole(t *testing.T) {
	t.Parallel()
	if got := compaction.EstimateText(strings.Repeat("a", 400)); got != 100 {
		t.Errorf("400 ASCII bytes: %d tokens", got)
	}
	if got := compaction.EstimateText("知识库检索"); got != 5 {
		t.Errorf("5 CJK characters: %d tokens", got)
	}
}

func TestTrimKeepsRecentMessagesAndDoesNotChangeTheInput(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("passage about > 0.8 & <tags> ", 200) // ~1400 tokens
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "sys"},
		{Role: llm.RoleUser, Content: "q1"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: `{"content":"` + strings.Repeat("x", 4000) + `"}`}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: big},
		{Role: llm.RoleUser, Content: "q2"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c2", Name: "query_kb", Arguments: `{}`}}},
		{Role: llm.RoleTool, ToolCallID: "c2", Content: big},
	}
	orig := append([]llm.Message(nil), msgs...)
	out, n := compaction.Trim(msgs, 100, 2)
	if n != 2 {
		t.Fatalf("trimmed %d, want the old result and the old arguments", n)
	}
	if out[3].Content == big || !strings.Contains(out[3].Content, "tool result trimmed") || compaction.EstimateText(out[3].Content) > 160 {
		t.Errorf("old tool result: %q", out[3].Content)
	}
	if !strings.HasPrefix(out[3].Content[strings.Index(out[3].Content, "\n")+1:], "passage about > 0.8 & <tags>") {
		t.Errorf("preview does not start with the result verbatim: %q", out[3].Content)
	}
	if !json.Valid([]byte(out[2].ToolCalls[0].Arguments)) || !strings.Contains(out[2].ToolCalls[0].Arguments, "_trimmed") {
		t.Errorf("old arguments: %q", out[2].ToolCalls[0].Arguments)
	}
	if out[6].Content != big {
		t.Error("the newest tool result was trimmed")
	}
	for i := range msgs {
		if msgs[i].Content != orig[i].Content || (len(msgs[i].ToolCalls) > 0 && msgs[i].ToolCalls[0].Arguments != orig[i].ToolCalls[0].Arguments) {
			t.Fatalf("input message %d changed", i)
		}
	}
	if compaction.Estimate(out) >= compaction.Estimate(msgs) {
		t.Error("the view is not smaller")
	}
}
