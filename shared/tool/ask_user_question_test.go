package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/tool"
)

func TestNormalizeQuestionsDefaultsAndTrims(t *testing.T) {
	t.Parallel()
	qs, err := tool.NormalizeQuestions(`{"questions":[
		{"question":"  Who reads it?  "},
		{"question_id":"format","question":"Format?","options":[{"label":" Markdown ","value":"markdown"},{"label":"PDF","value":"pdf","description":"printable"}],"allow_other":false}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 {
		t.Fatalf("got %d questions", len(qs))
	}
	if qs[0].QuestionID != "q-1" || qs[0].Question != "Who reads it?" || !qs[0].AllowOther || qs[0].MultiSelect || len(qs[0].Options) != 0 {
		t.Errorf("first question not normalised: %+v", qs[0])
	}
	if qs[1].QuestionID != "format" || qs[1].AllowOther || qs[1].Options[0].Label != "Markdown" || qs[1].Options[1].Description != "printable" {
		t.Errorf("second question not normalised: %+v", qs[1])
	}
}

func TestNormalizeQuestionsRejects(t *testing.T) {
	t.Parallel()
	six := `{"questions":[` + strings.Repeat(`{"question":"x"},`, 5) + `{"question":"x"}]}`
	cases := map[string]string{
		"json string":                         `{"questions":"[{\"question\":\"x\"}]"}`,
		"wrapper object":                      `{"questions":{"items":[{"question":"x"}]}}`,
		"no questions":                        `{"questions":[]}`,
		"six questions":                       six,
		"empty question":                      `{"questions":[{"question":"   "}]}`,
		"alias field":                         `{"questions":[{"text":"x"}]}`,
		"string option":                       `{"questions":[{"question":"x","options":["a","b"]}]}`,
		"string boolean":                      `{"questions":[{"question":"x","multi_select":"true"}]}`,
		"option without value":                `{"questions":[{"question":"x","options":[{"label":"a"}]}]}`,
		"six options":                         `{"questions":[{"question":"x","options":[` + strings.Repeat(`{"label":"a","value":"a"},`, 5) + `{"label":"a","value":"a"}]}]}`,
		"duplicate ids":                       `{"questions":[{"question_id":"a","question":"x"},{"question_id":"a","question":"y"}]}`,
		"explicit id collides with generated": `{"questions":[{"question_id":"q-2","question":"x"},{"question":"y"}]}`,
		"extra top-level key":                 `{"questions":[{"question":"x"}],"title":"t"}`,
		"not json":                            `questions: x`,
	}
	for name, args := range cases {
		if _, err := tool.NormalizeQuestions(args); err == nil {
			t.Errorf("%s: accepted %s", name, args)
		}
	}
}

func TestAskUserQuestionInterruptsOnlyWhenValid(t *testing.T) {
	t.Parallel()
	var ask tool.AskUserQuestion
	res, err := ask.Invoke(context.Background(), tool.Call{Arguments: `{"questions":[{"question":"Which city?"}]}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupt == nil || res.Interrupt.Kind != "ask_user_question_required" || res.Interrupt.Message != "Which city?" {
		t.Fatalf("valid questions must interrupt: %+v", res)
	}
	b, _ := json.Marshal(res.Interrupt.Payload)
	if !strings.Contains(string(b), `"question_id":"q-1"`) {
		t.Errorf("payload lacks normalised question: %s", b)
	}
	res, err = ask.Invoke(context.Background(), tool.Call{Arguments: `{"questions":"oops"}`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupt != nil || !res.IsError || !strings.Contains(res.Output, "invalid ask_user_question arguments") {
		t.Fatalf("invalid questions must be a tool error, not an interrupt: %+v", res)
	}
}

func TestRegistryVisibleKeepsBaseTools(t *testing.T) {
	t.Parallel()
	r := tool.NewRegistry(tool.AskUserQuestion{}, tool.MarkForImprovement{})
	names := func(specs []tool.Spec) []string {
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(r.Visible([]string{"nonexistent"})); len(got) != 2 {
		t.Errorf("base tools must stay visible whatever the selection: %v", got)
	}
	for _, s := range r.Specs() {
		if !json.Valid(s.Parameters) {
			t.Errorf("%s parameters are not JSON", s.Name)
		}
	}
}

func TestJSONKeepsMarkupReadableAndCompact(t *testing.T) {
	t.Parallel()
	got, err := tool.JSON(map[string]any{"content": "score > 0.8 & x < 1", "n": []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"content":"score > 0.8 & x < 1","n":[1,2]}`; got != want {
		t.Errorf("JSON = %q, want %q", got, want)
	}
}
