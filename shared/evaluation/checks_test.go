package evaluation

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/invoke"
)

func TestChecksOnOutputs(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["answer"],"properties":{"answer":{"type":"integer"}}}`)
	for _, c := range []struct {
		check  Check
		output string
		pass   bool
	}{
		{Check{Type: CheckContains, Value: "paris"}, "It is Paris.", true},
		{Check{Type: CheckContains, Value: "paris", CaseSensitive: true}, "It is Paris.", false},
		{Check{Type: CheckRegex, Pattern: `^\d+$`}, "42", true},
		{Check{Type: CheckRegex, Pattern: `^\d+$`}, "forty-two", false},
		{Check{Type: CheckJSONSchema, Schema: schema}, "```json\n{\"answer\": 42}\n```", true},
		{Check{Type: CheckJSONSchema, Schema: schema}, `{"answer": "42"}`, false},
		{Check{Type: CheckJSONSchema, Schema: schema}, `not json`, false},
		{Check{Type: CheckJudge, Prompt: "p"}, "anything", false}, // no judge model: not passed, with an error
	} {
		o := runCheck(context.Background(), c.check, SuiteItem{Input: "q"}, c.output, nil)
		if o.Passed != c.pass {
			t.Errorf("%+v on %q: %+v, want passed=%v", c.check, c.output, o, c.pass)
		}
	}
	over := 1.5
	for _, bad := range []Check{{Type: "vibes"}, {Type: CheckContains}, {Type: CheckRegex, Pattern: "("},
		{Type: CheckJSONSchema}, {Type: CheckJSONSchema, Schema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)},
		{Type: CheckJudge}, {Type: CheckJudge, Prompt: "p", Threshold: &over}} {
		if bad.validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestSuiteMetrics(t *testing.T) {
	one, half := 1.0, 0.5
	d := int64(100)
	items := []struct {
		status string
		passed bool
		judge  *float64
		checks []CheckOutcome
		traj   *invoke.TrajectorySummary
	}{
		{"completed", true, &one, []CheckOutcome{{Type: CheckContains, Passed: true}}, &invoke.TrajectorySummary{ToolCallCount: 2, StepCount: 3, DurationMS: &d, Usage: &invoke.Usage{TotalTokens: 10}}},
		{"completed", false, &half, []CheckOutcome{{Type: CheckContains}}, &invoke.TrajectorySummary{StepCount: 1, DurationMS: &d}},
		{"timeout", false, nil, []CheckOutcome{{Type: CheckContains}}, nil},
		{"completed", true, nil, nil, &invoke.TrajectorySummary{StepCount: 2}},
	}
	m := SuiteMetrics(func(yield func(string, bool, *float64, []CheckOutcome, *invoke.TrajectorySummary)) {
		for _, it := range items {
			yield(it.status, it.passed, it.judge, it.checks, it.traj)
		}
	})
	want := map[string]float64{"items": 4, "passed": 2, "pass_rate": 0.5, "completed_rate": 0.75, "error_count": 1, "judge_score": 0.75,
		"check_pass_rate.contains": 1.0 / 3, "avg_duration_ms": 100, "avg_tool_calls": 2.0 / 3, "avg_steps": 2, "total_tokens": 10}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, m[k], v, m)
		}
	}
}
