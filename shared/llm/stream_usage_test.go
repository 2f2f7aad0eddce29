package llm_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestStreamReportsProviderUsage(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("ok")
	reply.Usage = &llmtest.Usage{PromptTokens: 120, CompletionTokens: 7}
	s.Enqueue(reply)
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := llm.Usage{InputTokens: 120, OutputTokens: 7, TotalTokens: 127, Reported: true}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if !s.Requests()[0].IncludeUsage {
		t.Error("request did not ask for stream usage (stream_options.include_usage)")
	}
}

func TestStreamWithoutProviderUsage(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("ok")
	reply.NoUsage = true
	s.Enqueue(reply)
	resp, err := fakeModel(t, s).Stream(testCtx(t), userTurn("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Usage != (llm.Usage{}) {
		t.Errorf("usage = %+v, want zero and not reported", resp.Usage)
	}
}
