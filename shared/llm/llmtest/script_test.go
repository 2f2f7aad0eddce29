package llmtest_test

import (
	"os"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func TestExampleScriptParses(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("cmd/fakellm/testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := llmtest.ParseScript(data)
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	next := sc.Handler()
	req := llmtest.ChatRequest{Messages: []llmtest.Message{{Role: "user", Content: "echo me"}}}
	first := next(req)
	if len(first.Chunks) != 4 || first.Chunks[0].Reasoning == "" || first.Chunks[1].Content != "Hel" || first.Delay == 0 {
		t.Errorf("reply 1 = %+v", first)
	}
	calls := next(req)
	if len(calls.ToolCalls) != 2 || calls.ToolCalls[0].Arguments != `{"query":"yuxi"}` ||
		strings.Join(calls.ToolCalls[1].Fragments, "") != `{"expr":"1+1"}` || !calls.InterleaveToolCalls {
		t.Errorf("reply 2 = %+v", calls)
	}
	if echo := next(req); len(echo.Chunks) != 1 || echo.Chunks[0].Content != "echo me" || echo.Usage.PromptTokens != 12 {
		t.Errorf("reply 3 = %+v", echo)
	}
	next(req)
	if limited := next(req); limited.Status != 429 || limited.Header.Get("Retry-After") != "1" {
		t.Errorf("reply 5 = %+v", limited)
	}
	if cut := next(req); !cut.Disconnect || cut.DisconnectAfter != 1 {
		t.Errorf("reply 6 = %+v", cut)
	}
	next(req)
	if again := next(req); len(again.Chunks) != 4 { // "after": "cycle"
		t.Errorf("script did not cycle: %+v", again)
	}
}

func TestScriptExhaustion(t *testing.T) {
	t.Parallel()
	sc, err := llmtest.ParseScript([]byte(`{"after":"fail","replies":[{"text":["only"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	next := sc.Handler()
	next(llmtest.ChatRequest{})
	if r := next(llmtest.ChatRequest{}); r.Status != 500 || !strings.Contains(r.Error, "exhausted") {
		t.Errorf("after exhaustion: %+v", r)
	}
	sc, _ = llmtest.ParseScript([]byte(`{"after":"repeat_last","replies":[{"text":["a"]},{"text":["b"]}]}`))
	next = sc.Handler()
	next(llmtest.ChatRequest{})
	next(llmtest.ChatRequest{})
	if r := next(llmtest.ChatRequest{}); r.Chunks[0].Content != "b" {
		t.Errorf("repeat_last: %+v", r)
	}
}

func TestBadScriptsAreRejected(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"replies":[]}`,
		`{"after":"sometimes","replies":[{"text":["a"]}]}`,
		`{"replies":[{"txt":["typo"]}]}`,
		`{"replies":[{"chunks":[{"content":"a"}],"text":["b"]}]}`,
		`{"replies":[{"status":200}]}`,
		`{"replies":[{"tool_calls":[{"arguments":{}}]}]}`,
		`{"replies":[{"tool_calls":[{"name":"f","arguments":[1]}]}]}`,
	} {
		if _, err := llmtest.ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%s) accepted", bad)
		}
	}
}
