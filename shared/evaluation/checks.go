package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// Check types.
const (
	CheckContains   = "contains"
	CheckRegex      = "regex"
	CheckJSONSchema = "json_schema"
	CheckJudge      = "judge"
)

// CheckOutcome is one check's verdict on an item's output.
type CheckOutcome struct {
	Type      string   `json:"type"`
	Passed    bool     `json:"passed"`
	Score     *float64 `json:"score,omitempty"`
	Reasoning string   `json:"reasoning,omitempty"`
	Error     string   `json:"error,omitempty"`
}

func (c Check) validate() error {
	switch c.Type {
	case CheckContains:
		if c.Value == "" {
			return errors.New("contains needs a value")
		}
	case CheckRegex:
		if _, err := regexp.Compile(c.Pattern); err != nil || c.Pattern == "" {
			return fmt.Errorf("regex needs a valid pattern: %v", err)
		}
	case CheckJSONSchema:
		if _, err := compileCheckSchema(c.Schema); err != nil {
			return fmt.Errorf("json_schema: %v", err)
		}
	case CheckJudge:
		if strings.TrimSpace(c.Prompt) == "" {
			return errors.New("judge needs a prompt (the criterion)")
		}
		if c.Threshold != nil && (*c.Threshold < 0 || *c.Threshold > 1) {
			return errors.New("judge threshold must be between 0 and 1")
		}
	default:
		return fmt.Errorf("unknown check type %q (contains, regex, json_schema, judge)", c.Type)
	}
	return nil
}

func compileCheckSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("schema is required")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	// No remote references: a schema may only refer to itself.
	c.UseLoader(noLoader{})
	const url = "https://yuxi.io/evaluation/check.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("remote schema %s not allowed", url)
}

// suiteJudgePrompt asks for strict JSON {"score": 0..1, "reasoning"}.
const suiteJudgePrompt = `You are a strict evaluator of an AI agent's answer.

Criterion: %s

Task given to the agent:
%s

Expected output (may be empty):
%s

Agent's output:
%s

Answer with one JSON object only: {"score": a number from 0 to 1, "reasoning": "a short reason"}`

// runCheck applies one check to output; judge is the suite's judge model.
func runCheck(ctx context.Context, c Check, it SuiteItem, output string, judgeModel llm.ChatModel) CheckOutcome {
	o := CheckOutcome{Type: c.Type}
	switch c.Type {
	case CheckContains:
		if c.CaseSensitive {
			o.Passed = strings.Contains(output, c.Value)
		} else {
			o.Passed = strings.Contains(strings.ToLower(output), strings.ToLower(c.Value))
		}
	case CheckRegex:
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			o.Error = err.Error()
			return o
		}
		o.Passed = re.MatchString(output)
	case CheckJSONSchema:
		sch, err := compileCheckSchema(c.Schema)
		if err != nil {
			o.Error = err.Error()
			return o
		}
		text := strings.TrimSpace(output)
		if m := fence.FindStringSubmatch(text); m != nil {
			text = m[1]
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			o.Error = "the output is not JSON: " + err.Error()
			return o
		}
		if err := sch.Validate(v); err != nil {
			o.Error = err.Error()
			return o
		}
		o.Passed = true
	case CheckJudge:
		threshold := 0.5
		if c.Threshold != nil {
			threshold = *c.Threshold
		}
		var j Judgement
		switch {
		case judgeModel == nil:
			o.Error = "no judge model"
			return o
		case strings.TrimSpace(output) == "":
			j = Judgement{Score: 0, Reasoning: "no output"}
		default:
			expected := ""
			if it.ExpectedOutput != nil {
				expected = *it.ExpectedOutput
			}
			out, err := complete(ctx, judgeModel, fmt.Sprintf(suiteJudgePrompt, c.Prompt, it.Input, expected, output))
			if err == nil {
				j, err = ParseJudgement(out)
			}
			if err != nil {
				j = Judgement{Score: 0, Reasoning: "judge error: " + err.Error()}
			}
		}
		o.Score, o.Reasoning, o.Passed = &j.Score, j.Reasoning, j.Score >= threshold
	}
	return o
}
