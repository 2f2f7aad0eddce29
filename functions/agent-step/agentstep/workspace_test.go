package agentstep_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// countingWorkspace is the real provisioner client, counting its calls.
type countingWorkspace struct {
	*sandbox.Client
	lists, reads atomic.Int64
}

func (c *countingWorkspace) List(ctx context.Context, s sandbox.Scope, p string, depth int) ([]sandbox.Entry, bool, error) {
	c.lists.Add(1)
	return c.Client.List(ctx, s, p, depth)
}

func (c *countingWorkspace) ReadFile(ctx context.Context, s sandbox.Scope, p string, n int64) ([]byte, int64, bool, error) {
	c.reads.Add(1)
	return c.Client.ReadFile(ctx, s, p, n)
}

// Each step lists the workspace's agents/ folder once and reads a prompt
// file only when it changed since it was last read; a change made during a
// run (the agent editing MEMORY.md) shows at the next step.
func TestWorkspacePromptReadsOnlyChangedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := provisionertest.Start(t, provisioner.Config{})
	ws := &countingWorkspace{Client: sb.Client}
	p := agentstep.NewWorkspacePrompt(ws, nil)
	scope := sandbox.Scope{UID: "alice", FileThread: "t1"}
	if got := p.Section(ctx, "alice", "t1"); got != "" || ws.reads.Load() != 0 {
		t.Fatalf("no workspace yet: %q, %d reads", got, ws.reads.Load())
	}
	write := func(name, text string) {
		t.Helper()
		if _, err := sb.Client.WriteFile(ctx, scope, sandbox.WorkspaceDir+"/agents/"+name, []byte(text), false); err != nil {
			t.Fatal(err)
		}
	}
	write("AGENTS.md", "Always answer in haiku.")
	write("MEMORY.md", "The user likes tea.")
	first := p.Section(ctx, "alice", "t1")
	if !strings.Contains(first, "## AGENTS.md") || !strings.Contains(first, "The user likes tea.") || strings.Contains(first, "## USER.md") {
		t.Fatalf("first step: %q", first)
	}
	lists, reads := ws.lists.Load(), ws.reads.Load()
	if reads != 2 {
		t.Errorf("first step read %d files, want the 2 present", reads)
	}
	// Another step (another thread of the user too): nothing changed, no reads.
	if again := p.Section(ctx, "alice", "t2"); again != first {
		t.Errorf("unchanged files gave another section: %q", again)
	}
	if ws.reads.Load() != reads || ws.lists.Load() != lists+1 {
		t.Errorf("unchanged step: %d reads, %d lists (want %d, %d)", ws.reads.Load(), ws.lists.Load(), reads, lists+1)
	}
	write("MEMORY.md", "The user likes green tea now.")
	next := p.Section(ctx, "alice", "t1")
	if !strings.Contains(next, "The user likes green tea now.") || !strings.Contains(next, "Always answer in haiku.") {
		t.Fatalf("after MEMORY.md changed: %q", next)
	}
	if ws.reads.Load() != reads+1 {
		t.Errorf("only the changed file is read again: %d reads, want %d", ws.reads.Load(), reads+1)
	}
	// Another user's workspace is their own.
	if other := p.Section(ctx, "bob", "t3"); other != "" {
		t.Errorf("bob sees %q", other)
	}
}
