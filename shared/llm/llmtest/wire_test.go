package llmtest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func post(t *testing.T, s *llmtest.Server, body string) *http.Response {
	t.Helper()
	res, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// events reads a whole event stream: the data payloads, in order.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("event not terminated by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		out = append(out, data)
		expectBlank = true
	}
	return out
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *llmtest.Usage `json:"usage"`
}

func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{
		Chunks:    []llmtest.Chunk{{Reasoning: "hm"}, {Content: "Hi"}},
		ToolCalls: []llmtest.ToolCall{{Name: "f", Fragments: []string{`{"a"`, `:1}`}}},
		Usage:     &llmtest.Usage{PromptTokens: 5, CompletionTokens: 3},
	})
	res := post(t, s, `{"model":"m1","stream":true,"stream_options":{"include_usage":true},
		"messages":[{"role":"user","content":"hello"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	evs := events(t, res.Body)
	// reasoning, content, 2 tool fragments, finish, usage, [DONE]
	if len(evs) != 7 || evs[6] != "[DONE]" {
		t.Fatalf("events = %q", evs)
	}
	var chunks []wireChunk
	for _, e := range evs[:6] {
		var c wireChunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %s: %v", e, err)
		}
		if c.ID != "chatcmpl-llmtest-1" || c.Object != "chat.completion.chunk" || c.Created == 0 || c.Model != "m1" {
			t.Errorf("chunk envelope: %s", e)
		}
		chunks = append(chunks, c)
	}
	if d := chunks[0].Choices[0].Delta; d.Role != "assistant" || d.ReasoningContent != "hm" {
		t.Errorf("first chunk: %s", evs[0])
	}
	if d := chunks[1].Choices[0].Delta; d.Role != "" || d.Content == nil || *d.Content != "Hi" {
		t.Errorf("content chunk: %s", evs[1])
	}
	tc0, tc1 := chunks[2].Choices[0].Delta.ToolCalls, chunks[3].Choices[0].Delta.ToolCalls
	if len(tc0) != 1 || tc0[0].ID != "call_1_0" || tc0[0].Type != "function" || tc0[0].Function.Name != "f" || tc0[0].Function.Arguments != `{"a"` {
		t.Errorf("first tool fragment: %s", evs[2])
	}
	if len(tc1) != 1 || tc1[0].ID != "" || tc1[0].Function.Name != "" || tc1[0].Function.Arguments != `:1}` {
		t.Errorf("second tool fragment: %s", evs[3])
	}
	for i := 0; i < 4; i++ {
		if chunks[i].Choices[0].FinishReason != nil || !strings.Contains(evs[i], `"finish_reason":null`) || !strings.Contains(evs[i], `"usage":null`) {
			t.Errorf("chunk %d should carry finish_reason and usage as null: %s", i, evs[i])
		}
	}
	if fr := chunks[4].Choices[0].FinishReason; fr == nil || *fr != "tool_calls" {
		t.Errorf("finish chunk: %s", evs[4])
	}
	if len(chunks[5].Choices) != 0 || !strings.Contains(evs[5], `"choices":[]`) || chunks[5].Usage == nil ||
		*chunks[5].Usage != (llmtest.Usage{PromptTokens: 5, CompletionTokens: 3, TotalTokens: 8}) {
		t.Errorf("usage chunk: %s", evs[5])
	}
}

func TestStreamWithoutUsageOption(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Text("a"))
	evs := events(t, post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`).Body)
	if len(evs) != 3 || evs[2] != "[DONE]" || strings.Contains(evs[0], "usage") {
		t.Errorf("events = %q", evs)
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{
		Chunks:    []llmtest.Chunk{{Reasoning: "r"}, {Content: "Hel"}, {Content: "lo"}},
		ToolCalls: []llmtest.ToolCall{{ID: "c9", Name: "f", Arguments: `{}`}},
	})
	res := post(t, s, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role             string `json:"role"`
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage llmtest.Usage `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	m := out.Choices[0].Message
	if out.Object != "chat.completion" || m.Role != "assistant" || m.Content != "Hello" || m.ReasoningContent != "r" ||
		len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "c9" || out.Choices[0].FinishReason != "tool_calls" || out.Usage.TotalTokens == 0 {
		t.Errorf("answer = %+v", out)
	}
}

func TestScriptedErrorStatus(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	r := llmtest.Fail(http.StatusTooManyRequests, "slow down")
	r.Header = http.Header{"Retry-After": {"3"}}
	s.Enqueue(r)
	res := post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "3" || !strings.Contains(string(b), `"message":"slow down"`) {
		t.Errorf("status %d body %s", res.StatusCode, b)
	}
}

func TestHandlerAnswersWhenQueueIsEmpty(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Text("queued"))
	s.Handle(func(req llmtest.ChatRequest) llmtest.Reply { return llmtest.Text("echo: " + req.LastUserMessage()) })
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"ping"}]}`
	first := strings.Join(events(t, post(t, s, body).Body), "")
	second := strings.Join(events(t, post(t, s, body).Body), "")
	if !strings.Contains(first, `"content":"queued"`) || !strings.Contains(second, `"content":"echo: ping"`) {
		t.Errorf("first %s\nsecond %s", first, second)
	}
	if s.Pending() != 0 || len(s.Requests()) != 2 || s.Requests()[1].Seq != 2 {
		t.Errorf("pending %d, requests %+v", s.Pending(), s.Requests())
	}
}

func TestChunkDelaysDoNotReorder(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "a", Delay: 5e6}, {Content: "b"}}, Delay: 1e6})
	evs := events(t, post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`).Body)
	if len(evs) != 4 || !strings.Contains(evs[0], `"content":"a"`) || !strings.Contains(evs[1], `"content":"b"`) {
		t.Errorf("events = %q", evs)
	}
}

func TestCloseReleasesHeldReplies(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	reply := llmtest.Text("never")
	reply.Block = make(chan struct{}) // never closed
	s.Enqueue(reply)
	res := post(t, s, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	// Headers arrived: the server is now holding the stream.
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(res.Body)
		done <- b
	}()
	s.Close()
	if b := <-done; strings.Contains(string(b), "[DONE]") {
		t.Errorf("held reply completed instead of being cut: %s", b)
	}
}
