package subagent_test

import (
	"slices"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/subagent"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// A sub-agent cannot reach the user: no ask_user_question, no
// present_artifacts (as the original); a main run keeps both.
func TestSubagentRunsAreNotOfferedUserFacingTools(t *testing.T) {
	specs := []tool.Spec{{Name: "read_file"}, {Name: "present_artifacts"}, {Name: "ask_user_question"}}
	names := func(ss []tool.Spec) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(subagent.FilterSpecs(run.Run{RunType: run.TypeSubagent}, specs)); !slices.Equal(got, []string{"read_file"}) {
		t.Errorf("sub-agent run offered %v", got)
	}
	if got := names(subagent.FilterSpecs(run.Run{RunType: "chat"}, specs)); !slices.Equal(got, []string{"read_file", "present_artifacts", "ask_user_question"}) {
		t.Errorf("main run offered %v", got)
	}
}
