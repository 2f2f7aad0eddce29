package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 10: the sandbox provisioner on bwrap against bare bubblewrap.
// Kept apart from the platform's figures: it needs no database.
const (
	sandboxCold       = 30
	sandboxWarm       = 100
	sandboxColdTarget = 3.0
	sandboxWarmTarget = 2.0
	sandboxSettle     = 50 * time.Millisecond
)

func figSandbox(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[10] sandbox provisioner (bwrap backend) vs bare bubblewrap",
		fmt.Sprintf("the provisioner `make run` starts (local.StartSandbox: HTTP on loopback, bearer token, bwrap backend with cgroups, seccomp, "+
			"rlimits, uid %d) driven through shared/sandbox; cold: a new scope's POST /api/sandboxes then its first exec of `true` "+
			"(volume layout, cgroups, bwrap start), %d times; warm: exec `true` in an existing sandbox, %d times, %s apart "+
			"(the bwrap backend parks each exec's tree before its request: the pause lets the next one be set up); "+
			"floor: `bwrap --unshare-all --die-with-parent` with /usr bound read-only and /proc, /dev, running `true` as the same uid "+
			"started directly from Go, interleaved with the measured calls", backend.SandboxUID, sandboxCold, sandboxWarm, sandboxSettle))
	if _, err := exec.LookPath("bwrap"); err != nil {
		return fmt.Errorf("bubblewrap is not installed (make sandbox-tools): %w", err)
	}
	dir, err := os.MkdirTemp("", "yuxi-bench-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := local.StartSandbox(ctx, local.SandboxConfig{VolumeDir: filepath.Join(dir, "volume"), Backend: "bwrap", CgroupParent: "yuxi-bench-" + filepath.Base(dir)})
	if err != nil {
		return err
	}
	floor := func() (time.Duration, error) {
		cmd := exec.CommandContext(ctx, "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "true")
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: backend.SandboxUID, Gid: backend.SandboxGID, Groups: []uint32{}}}
		}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("bare bwrap: %v: %s", err, out)
		}
		return time.Since(start), nil
	}
	run := func(scope sandbox.Scope, create bool) (time.Duration, error) {
		start := time.Now()
		if create {
			if _, err := c.Ensure(ctx, scope, nil); err != nil {
				return 0, err
			}
		}
		res, err := c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "true"})
		if err != nil {
			return 0, err
		}
		if res.ExitCode != 0 {
			return 0, fmt.Errorf("exec true: exit %d: %s", res.ExitCode, res.Output)
		}
		return time.Since(start), nil
	}
	// Warm-up: page cache, the provisioner's first connection.
	warmScope := sandbox.Scope{UID: "bench", FileThread: "warm"}
	for range 3 {
		if _, err := floor(); err != nil {
			return err
		}
		if _, err := run(warmScope, true); err != nil {
			return err
		}
	}
	e.Progress("figure 10: %d cold creates, %d warm execs, each next to a bare bwrap", sandboxCold, sandboxWarm)
	var cold, coldFloor, warm, warmFloor benchkit.Samples
	for i := range sandboxCold {
		f, err := floor()
		if err != nil {
			return err
		}
		d, err := run(sandbox.Scope{UID: "bench", FileThread: "cold-" + strconv.Itoa(i)}, true)
		if err != nil {
			return err
		}
		coldFloor, cold = append(coldFloor, f), append(cold, d)
	}
	for range sandboxWarm {
		f, err := floor()
		if err != nil {
			return err
		}
		d, err := run(warmScope, false)
		if err != nil {
			return err
		}
		warmFloor, warm = append(warmFloor, f), append(warm, d)
		// The backend sets up the sandbox's next tree after each exec (an
		// agent thinks for seconds between tool calls); let it finish so it
		// does not run under the next floor sample.
		time.Sleep(sandboxSettle)
	}
	cf, wf := coldFloor.Sorted().P50(), warmFloor.Sorted().P50()
	cp, wp := cold.Sorted().P50(), warm.Sorted().P50()
	r.Line("sandbox_floor_bare_bwrap_p50", benchkit.Ms(wf), "the floor: bare bwrap running true", "", false)
	coldRatio, warmRatio := benchkit.DurRatio(cp, cf), benchkit.DurRatio(wp, wf)
	r.Line("sandbox_cold_create_p50", benchkit.Ms(cp), benchkit.X(coldRatio)+" vs floor "+benchkit.Ms(cf), "≤ "+benchkit.X(sandboxColdTarget), coldRatio <= sandboxColdTarget)
	r.Line("sandbox_warm_exec_p50", benchkit.Ms(wp), benchkit.X(warmRatio)+" vs floor "+benchkit.Ms(wf), "≤ "+benchkit.X(sandboxWarmTarget), warmRatio <= sandboxWarmTarget)
	r.Detail("p99: cold %s, warm %s, floor %s", benchkit.Ms(cold.Sorted().P99()), benchkit.Ms(warm.Sorted().P99()), benchkit.Ms(warmFloor.Sorted().P99()))
	return viewerTree(ctx, e, r, c, func(s sandbox.Scope) string {
		return filepath.Join(dir, "volume", "threads", s.FileThread, "user-data", "outputs")
	})
}
