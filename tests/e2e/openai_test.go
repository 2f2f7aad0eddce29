package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func completion(model, user string, stream bool, msgs ...map[string]any) map[string]any {
	b := map[string]any{"model": model, "messages": msgs, "temperature": 0.2}
	if user != "" {
		b["user"] = user
	}
	if stream {
		b["stream"] = true
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

func u(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func openAIErr(t *testing.T, r testkit.Response) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || e.Error == nil || e.Error["message"] == nil || e.Error["type"] == nil {
		t.Fatalf("not an OpenAI error object: %d %s", r.Status, r.Body)
	}
	return e.Error
}

func TestOpenAICompatibleEndpoint(t *testing.T) {
	t.Parallel()
	p := testkit.StartLocal(t, nil)
	key := p.Admin.As(p.Admin.APIKey("openai"))

	// Models: the agents the caller can use; errors are OpenAI's.
	var models struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	key.Do("GET", "/v1/models", nil).Decode(t, &models)
	if models.Object != "list" || len(models.Data) == 0 || models.Data[0]["object"] != "model" {
		t.Fatalf("models: %+v", models)
	}
	found := false
	for _, m := range models.Data {
		found = found || m["id"] == "default-chatbot"
	}
	if !found {
		t.Fatalf("default-chatbot not listed: %+v", models.Data)
	}
	if r := key.As("yxkey_wrong").Do("GET", "/v1/models", nil); r.Status != 401 || openAIErr(t, r)["type"] != "authentication_error" {
		t.Errorf("bad key: %d %s", r.Status, r.Body)
	}
	if r := key.Do("POST", "/v1/chat/completions", completion("no-such-agent", "", false, u("x"))); r.Status != 404 || openAIErr(t, r)["code"] != "model_not_found" {
		t.Errorf("unknown model: %d %s", r.Status, r.Body)
	}
	if r := key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "", false)); r.Status != 422 || openAIErr(t, r)["type"] != "invalid_request_error" {
		t.Errorf("no messages: %d %s", r.Status, r.Body)
	}
	if r := key.Do("GET", "/v1/nothing", nil); r.Status != 404 || openAIErr(t, r)["code"] != "route_not_found" {
		t.Errorf("unknown route: %d %s", r.Status, r.Body)
	}

	// Non-streaming, a fresh thread: the client's earlier messages reach the agent.
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Four"}}, Usage: &llmtest.Usage{PromptTokens: 9, CompletionTokens: 1, TotalTokens: 10}})
	r := key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "", false,
		map[string]any{"role": "system", "content": "be terse"}, u("2+2?"), map[string]any{"role": "assistant", "content": "hm"}, u("well?")))
	var cc struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]float64 `json:"usage"`
	}
	r.Decode(t, &cc)
	if r.Status != 200 || cc.Object != "chat.completion" || cc.Model != "default-chatbot" || !strings.HasPrefix(cc.ID, "chatcmpl-") ||
		len(cc.Choices) != 1 || cc.Choices[0].Message["content"] != "Four" || cc.Choices[0].FinishReason != "stop" || cc.Usage["total_tokens"] != 10 {
		t.Fatalf("completion: %d %s", r.Status, r.Body)
	}
	if got := p.LLM.Requests()[0].LastUserMessage(); !strings.Contains(got, "user: 2+2?") || !strings.Contains(got, "assistant: hm") || !strings.HasSuffix(got, "user: well?") {
		t.Errorf("the agent got %q", got)
	}
	fresh := r.Header.Get("X-Yuxi-Thread-Id")

	// Streaming with usage.
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Hel"}, {Content: "lo"}}, Usage: &llmtest.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}})
	r = key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "", true, u("greet")))
	lines := testkit.DataLines(r.Body)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || len(lines) < 4 || lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("stream: %d %s", r.Status, r.Body)
	}
	var text strings.Builder
	var finish, role string
	var usage map[string]float64
	for _, l := range lines[:len(lines)-1] {
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta        map[string]any `json:"delta"`
				FinishReason *string        `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]float64 `json:"usage"`
		}
		if err := json.Unmarshal([]byte(l), &ch); err != nil || ch.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %q: %v", l, err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
			if len(ch.Choices) != 0 {
				t.Errorf("usage chunk with choices: %s", l)
			}
		}
		for _, c := range ch.Choices {
			if s, _ := c.Delta["role"].(string); s != "" {
				role = s
			}
			if s, _ := c.Delta["content"].(string); s != "" {
				text.WriteString(s)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if role != "assistant" || text.String() != "Hello" || finish != "stop" || usage["total_tokens"] != 5 {
		t.Fatalf("streamed role=%q text=%q finish=%q usage=%v\n%s", role, text.String(), finish, usage, r.Body)
	}

	// An error mid-stream is an error chunk before [DONE].
	p.LLM.Enqueue(llmtest.Fail(400, "the provider refused"))
	r = key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "", true, u("fail please")))
	lines = testkit.DataLines(r.Body)
	if r.Status != 200 || len(lines) < 3 || lines[len(lines)-1] != "[DONE]" || !strings.Contains(lines[len(lines)-2], `"error"`) {
		t.Fatalf("mid-stream error: %d %s", r.Status, r.Body)
	}

	// `user` continues a thread of its own per (caller, agent, user).
	p.LLM.Enqueue(llmtest.Text("Noted: blue."), llmtest.Text("Blue."))
	r1 := key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "alice-42", false, u("my color is blue")))
	r2 := key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "alice-42", false, u("what is my color?")))
	th := invoke.HashID("openai_", "admin:default-chatbot:alice-42")
	if r1.Header.Get("X-Yuxi-Thread-Id") != th || r2.Header.Get("X-Yuxi-Thread-Id") != th {
		t.Fatalf("user thread: %q %q", r1.Header.Get("X-Yuxi-Thread-Id"), r2.Header.Get("X-Yuxi-Thread-Id"))
	}
	reqs := p.LLM.Requests()
	last := reqs[len(reqs)-1]
	var saw bool
	for _, m := range last.Messages {
		saw = saw || (m.Role == "assistant" && m.Content == "Noted: blue.")
	}
	if !saw || last.LastUserMessage() != "what is my color?" {
		t.Fatalf("the second turn did not see the first: %+v", last.Messages)
	}
	// X-Yuxi-Thread-Id continues a thread the caller owns; another user's is 404.
	p.LLM.Enqueue(llmtest.Text("again"))
	if r := key.DoWith("POST", "/v1/chat/completions", completion("default-chatbot", "", false, u("more")), "X-Yuxi-Thread-Id", fresh); r.Status != 200 ||
		r.Header.Get("X-Yuxi-Thread-Id") != fresh {
		t.Errorf("continue by header: %d %s", r.Status, r.Body)
	}
	bob := p.Admin.NewUser("bob")
	bobKey := bob.As(bob.APIKey("bob"))
	calls := len(p.LLM.Requests())
	if r := bobKey.DoWith("POST", "/v1/chat/completions", completion("default-chatbot", "", false, u("mine?")), "X-Yuxi-Thread-Id", th); r.Status != 404 ||
		openAIErr(t, r)["code"] != "thread_not_found" {
		t.Errorf("bob on admin's thread: %d %s", r.Status, r.Body)
	}
	// The same `user` under another caller is another thread.
	p.LLM.Enqueue(llmtest.Text("hi bob"))
	if r := bobKey.Do("POST", "/v1/chat/completions", completion("default-chatbot", "alice-42", false, u("hello"))); r.Status != 200 ||
		r.Header.Get("X-Yuxi-Thread-Id") == th {
		t.Errorf("bob's user thread: %d %s %s", r.Status, r.Header.Get("X-Yuxi-Thread-Id"), r.Body)
	}
	if n := len(p.LLM.Requests()); n != calls+1 {
		t.Errorf("model calls: %d, want %d", n, calls+1)
	}

	// A question ends the completion; the next message answers it.
	p.LLM.Enqueue(llmtest.Calls(llmtest.ToolCall{ID: "ask1", Name: "ask_user_question",
		Arguments: `{"questions":[{"question":"Which city?","options":[{"label":"Kyoto","value":"kyoto"},{"label":"Osaka","value":"osaka"}]}]}`}))
	r = key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "trip", false, u("plan a trip")))
	r.Decode(t, &cc)
	if r.Status != 200 || cc.Choices[0].FinishReason != "stop" || !strings.Contains(cc.Choices[0].Message["content"].(string), "Which city?") ||
		!strings.Contains(cc.Choices[0].Message["content"].(string), "Kyoto") {
		t.Fatalf("question: %d %s", r.Status, r.Body)
	}
	p.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "Kyoto it is."}}})
	r = key.Do("POST", "/v1/chat/completions", completion("default-chatbot", "trip", true, u("kyoto")))
	lines = testkit.DataLines(r.Body)
	if r.Status != 200 || !strings.Contains(string(r.Body), "Kyoto it is.") || lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	reqs = p.LLM.Requests()
	tool := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	if tool.Role != "tool" || tool.ToolCallID != "ask1" || !strings.Contains(tool.Content, `"answer":{"q-1":"kyoto"}`) {
		t.Fatalf("the answer must reach the model as the tool result: %+v", tool)
	}
}
