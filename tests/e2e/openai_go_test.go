package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// TestOpenAIGoClient talks to /v1 with the official Go SDK.
func TestOpenAIGoClient(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	secret := p.Admin.APIKey("openai-go")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(p.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	c := client(secret)

	page, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range page.Data {
		found = found || m.ID == "default-chatbot"
	}
	if !found {
		t.Fatalf("models: %+v", page.Data)
	}

	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Hi from Go"}}, Usage: &llmtest.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}})
	cc, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "default-chatbot",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}, User: openai.String("gopher")})
	if err != nil {
		t.Fatal(err)
	}
	if cc.Choices[0].Message.Content != "Hi from Go" || cc.Choices[0].FinishReason != "stop" || cc.Usage.TotalTokens != 7 {
		t.Fatalf("completion: %+v", cc)
	}

	// Streaming, on the same conversation (`user`), with usage.
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Still "}, {Content: "here"}}, Usage: &llmtest.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11}})
	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "default-chatbot",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("still there?")},
		User:          openai.String("gopher"),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "Still here" || acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens != 11 {
		t.Fatalf("stream: %+v", acc.ChatCompletion)
	}
	reqs := p.LLM.Requests()
	var sawFirst bool
	for _, m := range reqs[len(reqs)-1].Messages {
		sawFirst = sawFirst || (m.Role == "assistant" && m.Content == "Hi from Go")
	}
	if !sawFirst {
		t.Error("the streamed turn did not continue the conversation")
	}

	// An auth error is an *openai.Error with the status.
	bad := client("yxkey_not_a_key")
	_, err = bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "default-chatbot",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type != "authentication_error" {
		t.Fatalf("auth error: %v", err)
	}

	// An error mid-stream surfaces as the stream's error.
	p.LLM.Enqueue(llmtest.Fail(400, "provider refused"))
	stream = c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "default-chatbot",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("fail")}})
	for stream.Next() {
	}
	if stream.Err() == nil {
		t.Fatal("a failed run streamed without an error")
	}
}
