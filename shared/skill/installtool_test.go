package skill_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// untouched is a workspace that counts the calls reaching it: a refused
// install must not reach it at all (the real provisioner is exercised by
// tests/e2e/install_skill_agent_test.go).
type untouched struct{ calls atomic.Int32 }

func (w *untouched) ReadFile(context.Context, sandbox.Scope, string, int64) ([]byte, int64, bool, error) {
	w.calls.Add(1)
	return nil, 0, false, nil
}
func (w *untouched) WriteFile(context.Context, sandbox.Scope, string, []byte, bool) (int64, error) {
	w.calls.Add(1)
	return 0, nil
}
func (w *untouched) DeleteFile(context.Context, sandbox.Scope, string, bool) error {
	w.calls.Add(1)
	return nil
}
func (w *untouched) List(context.Context, sandbox.Scope, string, int) ([]sandbox.Entry, bool, error) {
	w.calls.Add(1)
	return nil, false, nil
}

type runsOf map[string]run.Run

func (r runsOf) Get(_ context.Context, id string) (run.Run, error) { return r[id], nil }

// install_skill re-checks the user where the effect happens: not in a
// sub-agent run, not on another user's run, not for a deleted user.
func TestInstallSkillRechecksTheUserAtTheEffect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	for _, u := range []struct {
		uid     string
		deleted bool
	}{{"ann", false}, {"gone", true}} {
		if _, err := pool.Exec(ctx, `INSERT INTO users (uid, username, password_hash, role, is_deleted) VALUES ($1, $1, 'x', 'user', $2)`, u.uid, u.deleted); err != nil {
			t.Fatal(err)
		}
	}
	ws := &untouched{}
	svc := skill.New(pool, nil, ws, nil, nil, skill.Config{}, nil)
	runs := runsOf{
		"main": {ID: "main", UID: "ann", ThreadID: "t1"},
		"sub":  {ID: "sub", UID: "ann", ThreadID: "t2", RunType: run.TypeSubagent},
		"gone": {ID: "gone", UID: "gone", ThreadID: "t3"},
	}
	it := skill.InstallTool{Bind: func() (*skill.Service, skill.Runs) { return svc, runs }}
	args := `{"source":"/home/gem/user-data/outputs/x/SKILL.md"}`
	for _, c := range []struct {
		name string
		call tool.Call
		want string
	}{
		{"sub-agent", tool.Call{RunID: "sub", UID: "ann", ThreadID: "t2", Arguments: args}, "sub-agent cannot install"},
		{"another user's run", tool.Call{RunID: "main", UID: "bob", ThreadID: "t1", Arguments: args}, "not yours"},
		{"deleted user", tool.Call{RunID: "gone", UID: "gone", ThreadID: "t3", Arguments: args}, "no longer exists"},
		{"bad arguments", tool.Call{RunID: "main", UID: "ann", ThreadID: "t1", Arguments: `{"src":"x"}`}, "invalid arguments"},
	} {
		res, err := it.Invoke(ctx, c.call)
		if err != nil || !res.IsError || !strings.Contains(res.Output, c.want) {
			t.Errorf("%s: %+v %v", c.name, res, err)
		}
	}
	if n := ws.calls.Load(); n != 0 {
		t.Errorf("a refused install reached the workspace %d times", n)
	}
	// Without a bound service (agent-step only offers it) it says so.
	if res, _ := (skill.InstallTool{}).Invoke(ctx, tool.Call{RunID: "main", UID: "ann", Arguments: args}); !res.IsError {
		t.Errorf("unbound: %+v", res)
	}
}
