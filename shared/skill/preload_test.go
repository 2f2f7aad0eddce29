package skill_test

import (
	"context"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/run/runtest"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// A preloaded skill is active from the first step and its SKILL.md is in
// the system prompt; a skill that is only configured is listed, not
// injected, and its tools stay gated until read.
func TestPreloadedSkillInjectsItsSkillMD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := runtest.New(t)
	store, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	svc := skill.New(f.Pool, store, nil, nil, nil, skill.Config{}, nil)
	if _, err := svc.SyncBuiltins(ctx, "system"); err != nil {
		t.Fatal(err)
	}
	alice := f.User("alice")
	in := f.MustSubmit(alice, f.Thread("alice"), "hello", "")
	r, err := f.Runs.Get(ctx, *in.RunID)
	if err != nil {
		t.Fatal(err)
	}
	r.Payload.Context.Skills = []string{"html-preview", "deep-research"}
	r.Payload.Context.PreloadSkills = []string{"html-preview"}
	r.Payload.Context.Tools = []string{"read_file"}
	gate := svc.Gate()
	if _, _, err := gate.Executable(ctx, r); err != nil {
		t.Fatal(err)
	}
	specs := []tool.Spec{{Name: "read_file"}, {Name: "web_fetch"}, {Name: "web_search"}}
	for i := 0; i < 2; i++ { // the second step reads the cached text
		system, got, err := gate.Visible(ctx, r, nil, "base", specs)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(system, "## Skill html-preview (preloaded; /home/gem/skills/html-preview/SKILL.md)") ||
			!strings.Contains(system, "# HTML preview\n\nMarkdown stays the body of the answer.") {
			t.Fatalf("step %d: the preloaded SKILL.md is not in the system prompt:\n%s", i+1, system)
		}
		if strings.Contains(system, "# Deep research") || !strings.Contains(system, "- deep-research:") {
			t.Errorf("a configured skill is listed, not injected:\n%s", system)
		}
		if !strings.Contains(system, "- html-preview (active):") {
			t.Errorf("the preloaded skill is active from the start:\n%s", system)
		}
		if names(got) != "read_file" {
			t.Errorf("deep-research's web tools stay gated until it is read: %s", names(got))
		}
	}
}
