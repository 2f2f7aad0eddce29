package invoke

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestHashIDIsStablePrefixedAndBounded(t *testing.T) {
	a, b := HashID("channel_", "alice:slack:t1:C1"), HashID("channel_", "alice:slack:t1:C1")
	if a != b || !strings.HasPrefix(a, "channel_") || len(a) != 64 {
		t.Fatalf("HashID: %q %q", a, b)
	}
	if HashID("channel_", "bob:slack:t1:C1") == a {
		t.Fatal("another user's chat derived the same thread")
	}
}

func TestParseContent(t *testing.T) {
	cases := []struct {
		in        string
		text, img string
		code      string
	}{
		{in: `"hello"`, text: "hello"},
		{in: `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, text: "a\nb"},
		{in: `[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}}]`, text: "see", img: "QUJD"},
		{in: `[{"type":"image_url","image_url":{"url":"https://example.com/x.png"}}]`, code: "invalid_image"},
		{in: `[{"type":"image_url","image_url":{"url":"data:image/png;base64,QQ=="}},{"type":"image_url","image_url":{"url":"data:image/png;base64,QQ=="}}]`, code: "too_many_images"},
		{in: `[{"type":"audio"}]`, code: "invalid_messages"},
		{in: `42`, code: "invalid_messages"},
		{in: `null`, code: "invalid_messages"},
	}
	for _, c := range cases {
		got, err := ParseContent(json.RawMessage(c.in))
		if c.code != "" {
			fe, ok := failure.As(err)
			if !ok || fe.Code != c.code || fe.Kind != failure.KindUnprocessable {
				t.Errorf("%s: want %s, got %v", c.in, c.code, err)
			}
			continue
		}
		img := ""
		if got.Image != nil {
			img = *got.Image
		}
		if err != nil || got.Text != c.text || img != c.img {
			t.Errorf("%s: got %+v (%q) %v", c.in, got, img, err)
		}
	}
}

func TestFoldHistoryAndQuestions(t *testing.T) {
	msg := func(role, content string) ChatMessage {
		b, _ := json.Marshal(content)
		return ChatMessage{Role: role, Content: b}
	}
	if got := foldHistory(nil, "hi"); got != "hi" {
		t.Errorf("no history: %q", got)
	}
	got := foldHistory([]ChatMessage{msg("system", "be brief"), msg("user", "1+1?"), msg("assistant", "2")}, "and 2+2?")
	if got != "Conversation so far:\nsystem: be brief\nuser: 1+1?\nassistant: 2\n\nuser: and 2+2?" {
		t.Errorf("folded: %q", got)
	}
	qs := []question{{ID: "q-1", Question: "Which city?", Options: []struct {
		Label string `json:"label"`
		Value string `json:"value"`
	}{{"Kyoto", "kyoto"}, {"Osaka", "Osaka"}}}, {ID: "q-2", Question: "When?"}}
	text := renderQuestions(qs, nil)
	for _, want := range []string{"Which city?\n- Kyoto (kyoto)\n- Osaka", "When?", "keyed by q-1, q-2"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered %q lacks %q", text, want)
		}
	}
	fallback := "Pick one"
	if renderQuestions(nil, &fallback) != "Pick one" {
		t.Error("fallback to the run's message")
	}
}

func TestFinishReasonAndUsage(t *testing.T) {
	if f := finishReason("completed"); f == nil || *f != "stop" {
		t.Error("completed → stop")
	}
	if f := finishReason("interrupted"); f == nil || *f != "interrupted" {
		t.Error("interrupted → interrupted")
	}
	if finishReason("running") != nil {
		t.Error("running → null")
	}
	complete := json.RawMessage(`{"schema_version":2,"model_call_count":2,"usage_reported_call_count":2,"complete":true,"total":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}`)
	if u := CompleteUsage(complete); u == nil || u.PromptTokens != 5 || u.CompletionTokens != 3 || u.TotalTokens != 8 {
		t.Errorf("usage: %+v", u)
	}
	partial := json.RawMessage(`{"schema_version":2,"model_call_count":2,"usage_unavailable_call_count":1,"complete":false,"total":{"total_tokens":8}}`)
	if CompleteUsage(partial) != nil || CompleteUsage(nil) != nil {
		t.Error("usage must be null unless complete")
	}
}
