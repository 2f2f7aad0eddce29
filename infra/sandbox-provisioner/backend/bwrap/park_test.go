package bwrap

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/backendtest"
)

// TestParkedTreeIsInItsGroup: a parked tree's processes, the outer bwrap
// (moved at start) and the sandbox process it cloned, are all in the exec's
// group in every hierarchy before the request comes.
func TestParkedTreeIsInItsGroup(t *testing.T) {
	t.Parallel()
	b, err := New(Config{CgroupParent: "yuxi-test-park-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	if !b.CgroupsAvailable() {
		b.Close()
		t.Skip("no writable cgroup v1 memory and pids here")
	}
	vol := t.TempDir()
	for _, d := range []string{vol, filepath.Dir(vol)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	f := backendtest.NewFixture(t, vol, backend.Limits{})
	ctx := t.Context()
	t.Cleanup(func() {
		_ = b.Destroy(ctx, f.Spec.ID)
		b.Close()
	})
	if err := b.Ensure(ctx, f.Spec); err != nil {
		t.Fatal(err)
	}
	b.park(f.Spec.ID) // a no-op when Ensure's park is under way: take waits for it
	p, _, err := b.take(ctx, f.Spec.ID)
	if err != nil || p == nil {
		t.Fatalf("no parked tree: %v", err)
	}
	for ctrl, parent := range b.cg.dirs {
		procs, err := os.ReadFile(filepath.Join(parent, p.group, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(string(procs))
		if len(got) != 2 || !slices.Contains(got, strconv.Itoa(p.cmd.Process.Pid)) {
			t.Errorf("%s group %s holds %v, want the outer bwrap %d and its sandbox process", ctrl, p.group, got, p.cmd.Process.Pid)
		}
	}
	res, err := b.run(ctx, p, backend.ExecRequest{Command: "echo ok", Workdir: backend.WorkspaceDir, Timeout: 30 * time.Second, MaxOutput: 100})
	if err != nil || string(res.Output) != "ok\n" {
		t.Fatalf("run: %v %q", err, res.Output)
	}
}
