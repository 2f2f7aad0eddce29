package llm_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestStreamReadsReasoningContent(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{
		{Reasoning: "The user "},
		{Reasoning: "says hi."},
		{Content: "Hello!"},
	}})
	var deltas []llm.Delta
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), func(d llm.Delta) error {
		deltas = append(deltas, d)
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Reasoning != "The user says hi." || resp.Content != "Hello!" {
		t.Errorf("reasoning=%q content=%q", resp.Reasoning, resp.Content)
	}
	if len(deltas) != 3 || deltas[0].Reasoning != "The user " || deltas[0].Content != "" ||
		deltas[2].Reasoning != "" || deltas[2].Content != "Hello!" {
		t.Errorf("deltas = %+v", deltas)
	}
}
