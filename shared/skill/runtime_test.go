package skill_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

func names(specs []tool.Spec) string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

// A skill's tools and MCP tools stay hidden until its SKILL.md was read.
func TestSkillToolsAreGatedUntilActivation(t *testing.T) {
	t.Parallel()
	sn := skill.Snapshot{Skills: []skill.RunSkill{{Slug: "knowledge-base", Path: "/home/gem/skills/knowledge-base/SKILL.md",
		Tools: []string{"query_kb"}, MCPs: []string{"charts"}}}}
	specs := []tool.Spec{{Name: "ask_user_question", Base: true}, {Name: "read_file"}, {Name: "query_kb"}, {Name: "mcp__charts__draw"}, {Name: "mcp__other__x"}}
	sys, got, _ := skill.Apply(sn, skill.Activated(sn, nil), nil, []string{"other"}, "base", specs)
	if names(got) != "ask_user_question,read_file,mcp__other__x" || !strings.Contains(sys, "/home/gem/skills/knowledge-base/SKILL.md") {
		t.Fatalf("before activation: %s\n%s", names(got), sys)
	}
	out := "---"
	read := []run.Entry{{Role: "assistant", ToolCalls: []run.ToolCallEntry{{Name: "read_file", Status: "success", Output: &out,
		Input: `{"file_path":"/home/gem/skills/knowledge-base/./SKILL.md"}`}}}}
	_, got, _ = skill.Apply(sn, skill.Activated(sn, read), nil, []string{"other"}, "base", specs)
	if names(got) != "ask_user_question,read_file,query_kb,mcp__charts__draw,mcp__other__x" {
		t.Fatalf("after activation: %s", names(got))
	}
	// A failed read activates nothing; the agent's own tools are never gated.
	read[0].ToolCalls[0].Status = "error"
	_, got, _ = skill.Apply(sn, skill.Activated(sn, read), []string{"query_kb"}, nil, "base", specs)
	if names(got) != "ask_user_question,read_file,query_kb,mcp__other__x" {
		t.Fatalf("own tool: %s", names(got))
	}
}
