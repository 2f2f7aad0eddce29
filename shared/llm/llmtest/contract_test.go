package llmtest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

const (
	userMsg  = `{"role":"user","content":"hi"}`
	callsMsg = `{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},` +
		`{"id":"c2","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]}`
	result1 = `{"role":"tool","tool_call_id":"c1","content":"one"}`
	result2 = `{"role":"tool","tool_call_id":"c2","content":"two"}`
)

func body(messages ...string) string {
	return `{"model":"m","stream":true,"messages":[` + strings.Join(messages, ",") + `]}`
}

func TestContractRejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, want string
	}{
		{"not json", `{`, "not a JSON object"},
		{"no model", `{"messages":[` + userMsg + `]}`, "model must be a non-empty string"},
		{"no messages", `{"model":"m","messages":[]}`, "messages must not be empty"},
		{"unknown field", `{"model":"m","messages":[` + userMsg + `],"temprature":1}`, "unknown top-level fields: temprature"},
		{"stream options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[` + userMsg + `]}`, "stream_options is only allowed when stream is true"},
		{"unknown role", body(`{"role":"wizard","content":"x"}`), `unknown role "wizard"`},
		{"user without content", body(`{"role":"user"}`), "messages[0] (user) has no content"},
		{"empty assistant", body(userMsg, `{"role":"assistant"}`), "neither content nor tool_calls"},
		{"orphan tool result", body(userMsg, `{"role":"tool","tool_call_id":"nope","content":"x"}`),
			`tool_call_id "nope" matches no preceding assistant tool call`},
		{"unanswered call at end", body(userMsg, callsMsg, result1),
			"messages[1] (assistant) has tool_calls c2 without tool results at the end of the transcript"},
		{"unanswered call before user", body(userMsg, callsMsg, result1, userMsg),
			"messages[1] (assistant) has tool_calls c2 without tool results before messages[3] (user)"},
		{"answered twice", body(userMsg, callsMsg, result1, result2, `{"role":"assistant","content":"ok"}`, result1),
			`tool_call_id "c1" was already answered`},
		{"tool without id", body(userMsg, `{"role":"tool","content":"x"}`), "has no tool_call_id"},
		{"call without id", body(userMsg, `{"role":"assistant","tool_calls":[{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}]}`), "empty id"},
		{"duplicate call id", body(userMsg, callsMsg, result1, result2,
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, result1),
			`id "c1" already used in messages[1]`},
		{"arguments not json", body(userMsg, `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, `{"role":"tool","tool_call_id":"c","content":"x"}`),
			"arguments must be a JSON object"},
		{"bad tool name", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"has space"}}]}`, "must match"},
		{"duplicate tool", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}`, `duplicate function name "f"`},
		{"schema not object", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]}`, "parameters must be a JSON Schema object"},
		{"tool_choice without tools", `{"model":"m","messages":[` + userMsg + `],"tool_choice":"auto"}`, "tool_choice is set but no tools"},
	}
	s := llmtest.NewServer(t)
	s.ExpectRejections()
	s.Enqueue(llmtest.Text("must not be consumed by a rejected request"))
	for _, c := range cases {
		res := post(t, s, c.body)
		var e struct {
			Error struct{ Message, Code string }
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		if res.StatusCode != http.StatusUnprocessableEntity || e.Error.Code != "out_of_contract" || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: status %d, error %+v; want 422 mentioning %q", c.name, res.StatusCode, e.Error, c.want)
		}
	}
	reqs := s.Requests()
	for i, r := range reqs {
		if !strings.Contains(r.Violation, cases[i].want) {
			t.Errorf("%s: recorded violation %q", cases[i].name, r.Violation)
		}
	}
	if s.Pending() != 1 {
		t.Errorf("rejected requests consumed scripted replies: %d left", s.Pending())
	}
}

func TestContractAcceptsWellFormedTranscripts(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t) // any rejection fails this test
	valid := []string{
		body(`{"role":"system","content":"sys"}`, userMsg),
		body(`{"role":"developer","content":"dev"}`, `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:"}}]}`),
		body(userMsg, callsMsg, result2, result1, `{"role":"assistant","content":"done"}`, userMsg),
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"enable_thinking":true,"thinking_budget":1024,
		  "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"auto",
		  "messages":[` + userMsg + `]}`,
	}
	for i, b := range valid {
		s.Enqueue(llmtest.Text("ok"))
		if res := post(t, s, b); res.StatusCode != http.StatusOK {
			t.Errorf("valid request %d: status %d", i, res.StatusCode)
		}
	}
	if got := s.Requests()[1].Messages[1].Content; got != "a" {
		t.Errorf("array content flattened to %q", got)
	}
}

func TestViolationsAndUnscriptedRequestsAreReported(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reports []string
	s := llmtest.New(func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, msg)
	})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(s.Close)
	for _, b := range []string{body(userMsg, callsMsg), body(userMsg)} {
		res, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 2 || !strings.Contains(reports[0], "request #1 out of contract") ||
		!strings.Contains(reports[1], "no reply scripted for request #2") {
		t.Errorf("reports = %q", reports)
	}
}
