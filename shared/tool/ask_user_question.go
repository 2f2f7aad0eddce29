package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// AskUserQuestion is the builtin ask_user_question tool: it validates 1–5
// questions, normalises them (ids q-1… by position when omitted) and
// interrupts the run until the user answers. The answer becomes the tool's
// result {questions, answer} in the resume run.
type AskUserQuestion struct{}

const askUserQuestionSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["questions"],
  "properties": {
    "questions": {
      "type": "array", "minItems": 1, "maxItems": 5,
      "description": "1 to 5 questions to ask the user.",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["question"],
        "properties": {
          "question_id": {"type": "string", "description": "Stable id; defaults to q-<position>."},
          "question": {"type": "string", "description": "The question text."},
          "options": {
            "type": "array", "maxItems": 5,
            "description": "Choices; omit for a free-text question.",
            "items": {
              "type": "object", "additionalProperties": false, "required": ["label", "value"],
              "properties": {"label": {"type": "string"}, "value": {"type": "string"}, "description": {"type": "string"}}
            }
          },
          "multi_select": {"type": "boolean", "default": false},
          "allow_other": {"type": "boolean", "default": true},
          "operation": {"type": "string"}
        }
      }
    }
  }
}`

// Spec implements Tool.
func (AskUserQuestion) Spec() Spec {
	return Spec{
		Name: "ask_user_question", DisplayName: "Ask the user", Category: "builtin", Tags: []string{"interaction"}, Base: true,
		Description: "Ask the user one to five questions and wait for the answers. Use it when a decision or a missing fact belongs to the user. Omit options for free-text questions.",
		Parameters:  json.RawMessage(askUserQuestionSchema),
	}
}

// Option is a normalised choice.
type Option struct {
	Label       string `json:"label"`
	Value       string `json:"value"`
	Description string `json:"description,omitempty"`
}

// Question is a normalised question.
type Question struct {
	QuestionID  string   `json:"question_id"`
	Question    string   `json:"question"`
	Options     []Option `json:"options"`
	MultiSelect bool     `json:"multi_select"`
	AllowOther  bool     `json:"allow_other"`
	Operation   string   `json:"operation,omitempty"`
}

// NormalizeQuestions validates and normalises ask_user_question arguments.
func NormalizeQuestions(arguments string) ([]Question, error) {
	var args struct {
		Questions json.RawMessage `json:"questions"`
	}
	if err := strictDecode([]byte(arguments), &args); err != nil {
		return nil, fmt.Errorf("arguments must be an object with only a questions list: %v", err)
	}
	if len(args.Questions) == 0 || args.Questions[0] != '[' {
		return nil, fmt.Errorf("questions must be a JSON list of question objects")
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(args.Questions, &raw); err != nil {
		return nil, fmt.Errorf("questions must be a list: %v", err)
	}
	if len(raw) < 1 || len(raw) > 5 {
		return nil, fmt.Errorf("ask 1 to 5 questions, got %d", len(raw))
	}
	type rawQuestion struct {
		QuestionID  *string           `json:"question_id"`
		Question    *string           `json:"question"`
		Options     []json.RawMessage `json:"options"`
		MultiSelect *bool             `json:"multi_select"`
		AllowOther  *bool             `json:"allow_other"`
		Operation   *string           `json:"operation"`
	}
	out := make([]Question, 0, len(raw))
	seen := map[string]int{}
	for i, item := range raw {
		var rq rawQuestion
		if err := strictDecode(item, &rq); err != nil {
			return nil, fmt.Errorf("question %d: %v", i+1, err)
		}
		q := Question{AllowOther: true, Options: []Option{}}
		if rq.Question == nil || strings.TrimSpace(*rq.Question) == "" {
			return nil, fmt.Errorf("question %d: question must be a non-empty string", i+1)
		}
		q.Question = strings.TrimSpace(*rq.Question)
		q.QuestionID = fmt.Sprintf("q-%d", i+1)
		if rq.QuestionID != nil {
			id := strings.TrimSpace(*rq.QuestionID)
			if id == "" {
				return nil, fmt.Errorf("question %d: question_id must not be empty", i+1)
			}
			q.QuestionID = id
		}
		// Explicit ids may not collide with each other nor with ids generated for other positions.
		if prev, dup := seen[q.QuestionID]; dup {
			return nil, fmt.Errorf("questions %d and %d share the id %q", prev, i+1, q.QuestionID)
		}
		seen[q.QuestionID] = i + 1
		if len(rq.Options) > 5 {
			return nil, fmt.Errorf("question %d: at most 5 options", i+1)
		}
		for j, o := range rq.Options {
			var ro struct {
				Label       *string `json:"label"`
				Value       *string `json:"value"`
				Description *string `json:"description"`
			}
			if err := strictDecode(o, &ro); err != nil {
				return nil, fmt.Errorf("question %d option %d: options must be objects with label and value: %v", i+1, j+1, err)
			}
			if ro.Label == nil || strings.TrimSpace(*ro.Label) == "" || ro.Value == nil || strings.TrimSpace(*ro.Value) == "" {
				return nil, fmt.Errorf("question %d option %d: label and value must be non-empty strings", i+1, j+1)
			}
			opt := Option{Label: strings.TrimSpace(*ro.Label), Value: strings.TrimSpace(*ro.Value)}
			if ro.Description != nil {
				opt.Description = strings.TrimSpace(*ro.Description)
			}
			q.Options = append(q.Options, opt)
		}
		if rq.MultiSelect != nil {
			q.MultiSelect = *rq.MultiSelect
		}
		if rq.AllowOther != nil {
			q.AllowOther = *rq.AllowOther
		}
		if rq.Operation != nil {
			q.Operation = strings.TrimSpace(*rq.Operation)
		}
		out = append(out, q)
	}
	return out, nil
}

// strictDecode decodes JSON refusing unknown fields and wrong types (a string
// "true" is not a boolean, a string is not an options list).
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// Invoke implements Tool: valid questions interrupt the run.
func (AskUserQuestion) Invoke(ctx context.Context, c Call) (Result, error) {
	qs, err := NormalizeQuestions(c.Arguments)
	if err != nil {
		return Errorf("invalid ask_user_question arguments: " + err.Error()), nil
	}
	return Result{Interrupt: &Interrupt{
		Kind:    "ask_user_question_required",
		Message: qs[0].Question,
		Payload: map[string]any{"interrupt": "ask_user_question_required", "source": "ask_user_question", "questions": qs},
	}}, nil
}
