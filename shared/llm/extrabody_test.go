package llm_test

import (
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestExtraBodyWhitelistedKeysReachTheProvider(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Enqueue(llmtest.Text("ok"))
	req := userTurn("think")
	req.ExtraBody = map[string]any{
		"enable_thinking":  true,
		"thinking_budget":  1024,
		"thinking":         map[string]any{"type": "enabled"},
		"reasoning":        map[string]any{"effort": "high"},
		"reasoning_effort": "low",
	}
	if _, err := fakeModel(t, s).Stream(testCtx(t), req, nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	extra := s.Requests()[0].Extra
	want := map[string]string{
		"enable_thinking":  `true`,
		"thinking_budget":  `1024`,
		"thinking":         `{"type":"enabled"}`,
		"reasoning":        `{"effort":"high"}`,
		"reasoning_effort": `"low"`,
	}
	for k, v := range want {
		if string(extra[k]) != v {
			t.Errorf("top-level %s = %s, want %s", k, extra[k], v)
		}
	}
}

func TestExtraBodyRejectsUnknownKeysBeforeSending(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	req := userTurn("hi")
	req.ExtraBody = map[string]any{"enable_thinking": false, "model": "other-model", "temperature": 2}
	_, err := fakeModel(t, s).Stream(testCtx(t), req, nil)
	fe, ok := failure.As(err)
	if !ok || fe.Code != "extra_body_not_allowed" || fe.Kind != failure.KindInvalid {
		t.Fatalf("err = %v", err)
	}
	if want := "extra_body fields not allowed: model, temperature"; len(fe.Message) < len(want) || fe.Message[:len(want)] != want {
		t.Errorf("message = %q", fe.Message)
	}
	if llm.IsRetryable(err) {
		t.Error("a configuration error must not be retried")
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
	if err := llm.ValidateExtraBody(map[string]any{"reasoning_effort": "high"}); err != nil {
		t.Errorf("ValidateExtraBody: %v", err)
	}
}
