package crash

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const (
	researcherPrompt = "You are the researcher sub-agent."
	childAnswer      = "The researcher checked: the answer is 42."
)

// subagentModel answers from the transcript (a repeated call after a crash
// gets the same answer): the lead delegates with task, the researcher
// streams its answer slowly, the lead repeats it.
func subagentModel(req llmtest.ChatRequest) llmtest.Reply {
	if len(req.Messages) > 0 && req.Messages[0].Content == researcherPrompt {
		var chunks []llmtest.Chunk
		for _, w := range strings.SplitAfter(childAnswer, " ") {
			chunks = append(chunks, llmtest.Chunk{Content: w, Delay: 40 * time.Millisecond})
		}
		return llmtest.Reply{Chunks: chunks}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return llmtest.Text("Lead: done")
	}
	return llmtest.Calls(llmtest.ToolCall{ID: "call_task", Name: "task",
		Arguments: `{"description":"Find the answer.","subagent_slug":"researcher"}`})
}

// A SIGKILL while the child runs (at its claim, mid-stream, before its
// commit, after the parent was continued) resumes both runs after a
// restart; each finishes once and the parent's tool call has the child's
// answer exactly once.
func TestSubagentRunsSurviveSIGKILL(t *testing.T) {
	bin := testkit.Build(t, "./infra/local/cmd/yuxi-server")
	// Hit 1 of step.claimed / step.before_commit is the parent's first step,
	// hit 2 the child's; the first dispatch.before_next follows the child's
	// run.finished (after the parent's call was completed).
	for _, point := range []string{"step.claimed:2", "step.streaming", "step.before_commit:2", "dispatch.before_next"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			runSubagentScenario(t, bin, point)
		})
	}
}

func runSubagentScenario(t *testing.T, bin, point string) {
	st := testkit.NewStack(t)
	st.LLM.Handle(subagentModel)
	port := testkit.FreePort(t)
	env := st.Env(testkit.Env{"PORT": port})

	p1 := testkit.StartProc(t, bin, st.Env(testkit.Env{"PORT": port, "YUXI_CRASH_AT": point}), "/api/system/health")
	c := (&testkit.Client{T: t, Base: p1.URL}).Login("admin", "admin-password")
	c.OK("POST", "/api/agent", map[string]any{"name": "Researcher", "slug": "researcher", "is_subagent": true,
		"config_json": map[string]any{"context": map[string]any{"system_prompt": researcherPrompt}}})
	c.OK("POST", "/api/agent", map[string]any{"name": "Lead", "slug": "lead",
		"config_json": map[string]any{"context": map[string]any{"subagents": []string{"researcher"}}}})
	th := c.OK("POST", "/api/chat/thread", map[string]any{"agent_id": "lead", "title": "crash"})["id"].(string)
	runID := c.OK("POST", "/api/agent/runs", map[string]any{"query": "delegate", "agent_slug": "lead", "thread_id": th})["run_id"].(string)
	if !p1.Exited(30 * time.Second) {
		t.Fatalf("crash point %s was never reached\n%s", point, p1.Logs.String())
	}

	p2 := testkit.StartProc(t, bin, env, "/api/system/health")
	c2 := c.As(c.Token)
	c2.Base = p2.URL
	r := testkit.Render(c2.Collect(runID, 60*time.Second))
	if r.Ends != 1 || r.EndStatus != "completed" {
		t.Fatalf("parent run %s: %+v\n%s", runID, r, p2.Logs.String())
	}

	pool, err := postgres.Open(context.Background(), st.DBURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	facts := map[string][2]int{
		"child runs":             {count(t, pool, `SELECT count(*) FROM agent_runs WHERE created_by_run_id = $1 AND run_type = 'subagent'`, runID), 1},
		"completed child runs":   {count(t, pool, `SELECT count(*) FROM agent_runs WHERE created_by_run_id = $1 AND status = 'completed'`, runID), 1},
		"child steps":            {count(t, pool, `SELECT count(*) FROM agent_run_steps s JOIN agent_runs r ON r.id = s.run_id WHERE r.created_by_run_id = $1`, runID), 1},
		"child answers":          {count(t, pool, `SELECT count(*) FROM messages m JOIN agent_runs r ON r.id = m.run_id WHERE r.created_by_run_id = $1 AND m.role = 'assistant' AND m.content = $2`, runID, childAnswer), 1},
		"parent steps":           {count(t, pool, `SELECT count(*) FROM agent_run_steps WHERE run_id = $1`, runID), 2},
		"task call with answer":  {count(t, pool, `SELECT count(*) FROM tool_calls WHERE run_id = $1 AND tool_name = 'task' AND status = 'success' AND tool_output LIKE $2`, runID, "%"+childAnswer+"%"), 1},
		"parent final answers":   {count(t, pool, `SELECT count(*) FROM messages WHERE run_id = $1 AND role = 'assistant' AND content = 'Lead: done'`, runID), 1},
		"subagent threads":       {count(t, pool, `SELECT count(*) FROM subagent_threads`), 1},
		"permanent failures":     {count(t, pool, `SELECT count(*) FROM event_failures`), 0},
		"unfinished attempts":    {count(t, pool, `SELECT count(*) FROM agent_run_attempts WHERE finished_at IS NULL`), 0},
		"runs not ended":         {count(t, pool, `SELECT count(*) FROM agent_runs WHERE finished_at IS NULL`), 0},
		"completed runs overall": {count(t, pool, `SELECT count(*) FROM agent_runs WHERE status = 'completed'`), 2},
	}
	for name, f := range facts {
		if f[0] != f[1] {
			t.Errorf("%s: %d, want %d", name, f[0], f[1])
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprintf("logs after restart:\n%s", p2.Logs.String()))
	}
}
