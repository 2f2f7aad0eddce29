package llm_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// sse writes the given data payloads as a text/event-stream.
func sse(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
	}
}

func TestOpenRouterStyleReasoningField(t *testing.T) {
	t.Parallel()
	hs := newRawServer(t, sse(
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"hmm"},"finish_reason":null}]}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`,
		`[DONE]`,
	))
	resp, err := rawModel(t, hs).Stream(testCtx(t), rawRequest(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Reasoning != "hmm" || resp.Content != "ok" || resp.Usage.Reported {
		t.Errorf("resp = %+v", resp)
	}
}

func TestParallelCallsSharingIndexZeroAreKeptApart(t *testing.T) {
	t.Parallel()
	// Some compatible layers give every call index 0 and distinct ids.
	hs := newRawServer(t, sse(
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"x1","type":"function","function":{"name":"a","arguments":"{\"n\":1}"}}]},"finish_reason":null}]}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x2","type":"function","function":{"name":"b","arguments":"{\"n\":"}}]},"finish_reason":null}]}`,
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	))
	resp, err := rawModel(t, hs).Stream(testCtx(t), rawRequest(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.ToolCall{{ID: "x1", Name: "a", Arguments: `{"n":1}`}, {ID: "x2", Name: "b", Arguments: `{"n":2}`}}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0] != want[0] || resp.ToolCalls[1] != want[1] {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
}

func TestErrorEventWithStatusCode(t *testing.T) {
	t.Parallel()
	hs := newRawServer(t, sse(`{"error":{"code":401,"message":"key revoked"}}`))
	_, err := rawModel(t, hs).Stream(testCtx(t), rawRequest(), nil)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 401 || llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestStreamEndingWithoutFinishReasonIsIncomplete(t *testing.T) {
	t.Parallel()
	hs := newRawServer(t, sse(
		`{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"cut sh"},"finish_reason":null}]}`,
	))
	resp, err := rawModel(t, hs).Stream(testCtx(t), rawRequest(), nil)
	if !errors.Is(err, llm.ErrStreamIncomplete) || !llm.IsRetryable(err) {
		t.Fatalf("err = %v", err)
	}
	if resp.Content != "cut sh" {
		t.Errorf("partial content = %q", resp.Content)
	}
}
