package agent_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func ptr[T any](v T) *T { return &v }

// sameJSON compares two documents by value (key order and spacing aside).
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

func TestContextRoundTripKeepsUnknownFields(t *testing.T) {
	t.Parallel()
	in := []byte(`{
		"system_prompt": "be brief",
		"model": "openai:gpt-4o",
		"tools": ["ask_user_question"],
		"max_execution_steps": 7,
		"model_retry_times": 0,
		"knowledges": ["kb_1", "kb_2"],
		"mcps": ["github"],
		"skills": [],
		"preload_skills": null,
		"tool_approval_mode": "always_trust",
		"summary_threshold": 0.75,
		"subagents": [{"slug": "researcher", "nested": {"deep": [1, 2, {"x": true}]}}]
	}`)
	var c agent.Context
	if err := json.Unmarshal(in, &c); err != nil {
		t.Fatal(err)
	}
	if *c.SystemPrompt != "be brief" || *c.Model != "openai:gpt-4o" || len(c.Tools) != 1 || *c.MaxExecutionSteps != 7 || *c.ModelRetryTimes != 0 {
		t.Fatalf("known fields: %+v", c)
	}
	if len(c.Knowledges) != 2 || c.Knowledges[0] != "kb_1" {
		t.Fatalf("knowledges: %v", c.Knowledges)
	}
	if c.ToolApprovalMode == nil || *c.ToolApprovalMode != "always_trust" {
		t.Fatalf("tool_approval_mode: %v", c.ToolApprovalMode)
	}
	wantExtra := []string{"mcps", "skills", "preload_skills", "summary_threshold", "subagents"}
	if len(c.Extra) != len(wantExtra) {
		t.Fatalf("Extra has %d keys, want %d: %v", len(c.Extra), len(wantExtra), c.Extra)
	}
	for _, k := range wantExtra {
		if _, ok := c.Extra[k]; !ok {
			t.Errorf("Extra lost %q", k)
		}
	}
	for _, k := range []string{"system_prompt", "model", "tools", "knowledges", "max_execution_steps", "model_retry_times"} {
		if _, ok := c.Extra[k]; ok {
			t.Errorf("known field %q also in Extra", k)
		}
	}
	// Each unknown value is kept byte for byte as it came in.
	if got := string(c.Extra["mcps"]); got != `["github"]` {
		t.Errorf("mcps raw = %s", got)
	}
	if got := string(c.Extra["preload_skills"]); got != `null` {
		t.Errorf("an explicit null must be kept, got %s", got)
	}

	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, in)

	// A second trip is stable.
	var again agent.Context
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	out2, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, out2) {
		t.Fatalf("second round trip changed the document:\n%s\n%s", out, out2)
	}
}

func TestContextWithoutUnknownFields(t *testing.T) {
	t.Parallel()
	var c agent.Context
	if err := json.Unmarshal([]byte(`{"model": "p:m"}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Extra != nil {
		t.Fatalf("Extra = %v, want nil", c.Extra)
	}
	out, _ := json.Marshal(c)
	if string(out) != `{"model":"p:m"}` {
		t.Fatalf("marshal = %s", out)
	}
	empty, _ := json.Marshal(agent.Context{})
	if string(empty) != `{}` {
		t.Fatalf("empty context = %s", empty)
	}
	// A known field set in the struct wins over a stale copy in Extra.
	c.Extra = map[string]json.RawMessage{"model": json.RawMessage(`"old:value"`), "mcps": json.RawMessage(`["a"]`)}
	out, _ = json.Marshal(c)
	sameJSON(t, out, []byte(`{"model":"p:m","mcps":["a"]}`))
}

func TestContextUnmarshalRejectsWrongTypes(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{`{"tools": "all"}`, `{"max_execution_steps": "5"}`, `[]`, `{"model": 3}`} {
		var c agent.Context
		if err := json.Unmarshal([]byte(doc), &c); err == nil {
			t.Errorf("%s: accepted as %+v", doc, c)
		}
	}
}

func TestParseContext(t *testing.T) {
	t.Parallel()
	c, err := agent.ParseContext(json.RawMessage(`{"context": {"model": "p:m", "mcps": [1]}, "other": true}`))
	if err != nil || *c.Model != "p:m" || string(c.Extra["mcps"]) != `[1]` {
		t.Fatalf("ParseContext = %+v, %v", c, err)
	}
	for _, doc := range []string{``, `{}`, `{"context": null}`} {
		c, err := agent.ParseContext(json.RawMessage(doc))
		if err != nil || !reflect.DeepEqual(c, agent.Context{}) {
			t.Errorf("%q: %+v %v", doc, c, err)
		}
	}
	_, err = agent.ParseContext(json.RawMessage(`{"context": {"tools": 1}}`))
	if fe, ok := failure.As(err); !ok || fe.Code != "invalid_config_json" || fe.Kind != failure.KindUnprocessable {
		t.Fatalf("bad config_json: %v", err)
	}
}

func TestResolveAppliesDefaults(t *testing.T) {
	t.Parallel()
	r := agent.Context{}.Resolve()
	summary := agent.Summary{ThresholdK: agent.DefaultSummaryThresholdK, KeepMessages: agent.DefaultSummaryKeepMessages,
		Prompt: agent.DefaultSummaryPrompt, ToolResultTokenLimit: agent.DefaultSummaryToolResultTokens, L2TriggerRatio: agent.DefaultSummaryL2TriggerRatio}
	want := agent.Resolved{SystemPrompt: agent.DefaultSystemPrompt, Model: "", Tools: nil,
		MaxExecutionSteps: agent.DefaultMaxExecutionSteps, ModelRetryTimes: agent.DefaultModelRetryTimes, Summary: summary}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("defaults = %+v", r)
	}
	if agent.DefaultMaxExecutionSteps != 50 || agent.DefaultModelRetryTimes != 2 {
		t.Fatalf("documented defaults changed: steps %d retries %d", agent.DefaultMaxExecutionSteps, agent.DefaultModelRetryTimes)
	}

	set := agent.Context{SystemPrompt: ptr(""), Model: ptr("p:m"), Tools: []string{"t1"}, MaxExecutionSteps: ptr(3), ModelRetryTimes: ptr(0),
		Extra: map[string]json.RawMessage{"mcps": json.RawMessage(`[]`)}}.Resolve()
	want = agent.Resolved{SystemPrompt: "", Model: "p:m", Tools: []string{"t1"}, MaxExecutionSteps: 3, ModelRetryTimes: 0, Summary: summary}
	if !reflect.DeepEqual(set, want) {
		t.Fatalf("explicit values (including empty prompt and zero retries) must win: %+v", set)
	}
	if r := (agent.Context{Extra: map[string]json.RawMessage{"mcps": json.RawMessage(`["everything","docs"]`)}}).Resolve(); !reflect.DeepEqual(r.MCPs, []string{"everything", "docs"}) {
		t.Errorf("context.mcps resolved to %v", r.MCPs)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	known := func(name string) bool { return name == "ask_user_question" || name == "mark_for_improvement" }
	cases := []struct {
		name    string
		c       agent.Context
		known   func(string) bool
		wantErr string // substring of the message; "" = valid
	}{
		{"empty", agent.Context{}, known, ""},
		{"everything at its bounds", agent.Context{SystemPrompt: ptr(strings.Repeat("x", 100_000)), Model: ptr("p:m"),
			Tools: []string{"ask_user_question", "mark_for_improvement"}, MaxExecutionSteps: ptr(500), ModelRetryTimes: ptr(10)}, known, ""},
		{"lower bounds", agent.Context{MaxExecutionSteps: ptr(1), ModelRetryTimes: ptr(0)}, known, ""},
		{"empty model means system default", agent.Context{Model: ptr("")}, known, ""},
		{"model id with colons", agent.Context{Model: ptr("openrouter:meta/llama:free")}, known, ""},
		{"unknown extra fields are not validated", agent.Context{Extra: map[string]json.RawMessage{"mcps": json.RawMessage(`"junk"`)}}, known, ""},
		{"tool check skipped without a checker", agent.Context{Tools: []string{"anything"}}, nil, ""},

		{"prompt too long", agent.Context{SystemPrompt: ptr(strings.Repeat("x", 100_001))}, known, "system_prompt"},
		{"model without provider", agent.Context{Model: ptr(":gpt")}, known, "provider_id:model_id"},
		{"model without model id", agent.Context{Model: ptr("openai:")}, known, "provider_id:model_id"},
		{"model without colon", agent.Context{Model: ptr("gpt-4o")}, known, "provider_id:model_id"},
		{"model in the original's slash format", agent.Context{Model: ptr("openai/gpt-4o")}, known, "provider_id:model_id"},
		{"zero steps", agent.Context{MaxExecutionSteps: ptr(0)}, known, "max_execution_steps"},
		{"too many steps", agent.Context{MaxExecutionSteps: ptr(501)}, known, "max_execution_steps"},
		{"negative retries", agent.Context{ModelRetryTimes: ptr(-1)}, known, "model_retry_times"},
		{"too many retries", agent.Context{ModelRetryTimes: ptr(11)}, known, "model_retry_times"},
		{"unknown tool", agent.Context{Tools: []string{"ask_user_question", "rm_rf"}}, known, `unknown tool "rm_rf"`},
		{"duplicate tools", agent.Context{Tools: []string{"ask_user_question", "mark_for_improvement", "ask_user_question"}}, known, "duplicates"},
		{"duplicate tools without a checker", agent.Context{Tools: []string{"x", "x"}}, nil, "duplicates"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.c.Validate(tc.known)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			fe, ok := failure.As(err)
			if !ok || fe.Kind != failure.KindUnprocessable || fe.Code != "invalid_context" || !strings.Contains(fe.Message, tc.wantErr) {
				t.Fatalf("want 422 invalid_context mentioning %q, got %v", tc.wantErr, err)
			}
		})
	}
}

func TestItemsFilterByRole(t *testing.T) {
	t.Parallel()
	opts := []agent.Option{{Value: "ask_user_question", Label: "Ask"}, {Value: "mark_for_improvement", Label: "Mark"}}
	keys := func(items []agent.Item) []string {
		var k []string
		for _, it := range items {
			k = append(k, it.Key)
		}
		return k
	}
	admin := agent.Items(opts, true)
	if got := keys(admin); !reflect.DeepEqual(got, []string{"system_prompt", "model", "tools", "knowledges", "max_execution_steps", "model_retry_times",
		"mcps", "skills", "preload_skills", "subagents", "tool_approval_mode", "summary_threshold", "summary_keep_messages", "summary_prompt",
		"summary_tool_result_token_limit", "summary_l2_trigger_ratio"}) {
		t.Fatalf("admin items = %v", got)
	}
	user := agent.Items(opts, false)
	if got := keys(user); !reflect.DeepEqual(got, []string{"system_prompt", "model", "tools", "knowledges", "mcps", "skills", "preload_skills", "subagents", "tool_approval_mode"}) {
		t.Fatalf("user items = %v", got)
	}
	for _, it := range user {
		if it.AdminOnly {
			t.Errorf("user sees admin-only item %s", it.Key)
		}
	}
	byKey := map[string]agent.Item{}
	for _, it := range admin {
		byKey[it.Key] = it
	}
	steps, retries := byKey["max_execution_steps"], byKey["model_retry_times"]
	if !steps.AdminOnly || steps.Default != agent.DefaultMaxExecutionSteps || *steps.Min != 1 || *steps.Max != agent.MaxMaxExecutionSteps || steps.Type != "int" {
		t.Errorf("max_execution_steps item = %+v", steps)
	}
	if !retries.AdminOnly || retries.Default != agent.DefaultModelRetryTimes || *retries.Min != 0 || *retries.Max != agent.MaxModelRetryTimes {
		t.Errorf("model_retry_times item = %+v", retries)
	}
	if tools := byKey["tools"]; !reflect.DeepEqual(tools.Options, opts) || tools.Type != "list" || tools.Kind != "tools" {
		t.Errorf("tools item = %+v", tools)
	}
	if p := byKey["system_prompt"]; p.Default != agent.DefaultSystemPrompt || p.Kind != "prompt" {
		t.Errorf("system_prompt item = %+v", p)
	}
	// Filtering for a user must not disturb a later admin listing.
	if again := agent.Items(opts, true); len(again) != 16 {
		t.Fatalf("admin items after a user listing: %v", keys(again))
	}
}
