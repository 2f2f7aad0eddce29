package llm_test

import (
	"context"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

// fakeModel returns the fake server's model through the registry, as the
// platform would get it: provider "fake" from the environment, spec
// "fake:test-model".
func fakeModel(t *testing.T, s *llmtest.Server, env ...string) llm.ChatModel {
	t.Helper()
	env = append([]string{"YUXI_PROVIDER_FAKE_BASE_URL=" + s.URL()}, env...)
	reg, err := llm.LoadRegistry(env, nil)
	if err != nil {
		t.Fatalf("LoadRegistry: %v", err)
	}
	m, id, err := reg.ChatModel("fake:test-model")
	if err != nil {
		t.Fatalf("ChatModel: %v", err)
	}
	if id != "test-model" {
		t.Fatalf("model id = %q", id)
	}
	return m
}

// testCtx bounds a test that could otherwise hang on a bug.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userTurn(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}
