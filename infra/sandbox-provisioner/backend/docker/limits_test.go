package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker"
)

// limitedSpec is a sandbox with small limits, so the tests hit them fast.
func limitedSpec(w *world, id string) backend.Spec {
	s := w.spec(id, "u1", "ft-"+id, "st1")
	s.Limits = backend.Limits{MemoryBytes: 64 << 20, Pids: 32, CPUSeconds: 2, FileSizeBytes: 8 << 20}
	return s
}

// healthy checks the sandbox still answers and the engine is fine.
func healthy(t *testing.T, w *world, id string) {
	t.Helper()
	if got := w.ok(id, `echo alive`); got != "alive\n" {
		t.Fatalf("after the limit: %q", got)
	}
	if err := w.b.Ping(context.Background()); err != nil {
		t.Fatalf("engine: %v", err)
	}
}

func TestForkBombIsStopped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := limitedSpec(w, "sb-fork")
	w.ensure(s)
	if got := w.ok(s.ID, `cat /sys/fs/cgroup/pids/pids.max`); got != "32\n" {
		t.Fatalf("pids.max %q", got)
	}
	// Past the limit, fork fails (ash gives up at the first failure); the
	// processes that did start stay under the limit, as the host's cgroup shows.
	out := w.exec(s.ID, `n=0; while [ $n -lt 100 ]; do sleep 120 & n=$((n+1)); done; echo "started $n"`, time.Minute)
	if !strings.Contains(string(out.Output), "can't fork") || out.ExitCode == 0 {
		t.Fatalf("spawning 100 sleeps: %+v %s", out, out.Output)
	}
	if cur := hostPids(t, w, s.ID); cur < 20 || cur > 32 {
		t.Fatalf("pids.current %d", cur)
	}
	// The sandbox is full: the next command clears it and runs; a fork bomb
	// is stopped at its timeout, and the sandbox answers afterwards.
	res := w.exec(s.ID, `b(){ b | b & }; b; sleep 600`, 5*time.Second)
	if !res.TimedOut && !strings.Contains(string(res.Output), "can't fork") {
		t.Fatalf("fork bomb: %+v %s", res, res.Output)
	}
	if cur := hostPids(t, w, s.ID); cur > 32 {
		t.Fatalf("pids.current %d after the bomb", cur)
	}
	healthy(t, w, s.ID)

}

func TestMemoryHogIsStopped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := limitedSpec(w, "sb-mem")
	w.ensure(s)
	if got := w.ok(s.ID, `cat /sys/fs/cgroup/memory/memory.limit_in_bytes`); got != "67108864\n" {
		t.Fatalf("memory limit %q", got)
	}
	// A string doubling forever: the OOM killer stops it inside the cgroup.
	res := w.exec(s.ID, `awk 'BEGIN { s = "x"; for (;;) s = s s }'`, time.Minute)
	if res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("memory hog: %+v %s", res, res.Output)
	}
	t.Logf("memory hog: exit %d: %s", res.ExitCode, res.Output)
	if got := w.ok(s.ID, `grep oom_kill /sys/fs/cgroup/memory/memory.oom_control; cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes`); !strings.Contains(got, "oom_kill 1\n") || !strings.HasSuffix(got, "\n67108864\n") {
		t.Fatalf("the cgroup's OOM killer did not stop it: %s", got)
	}
	healthy(t, w, s.ID)
}

func TestDiskFillerIsStopped(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *docker.Config) { c.HomeBytes = 16 << 20 })
	s := limitedSpec(w, "sb-disk")
	w.ensure(s)
	// On the volume: the file-size limit stops the file at 8 MiB.
	out := w.fails(s.ID, `dd if=/dev/zero of=outputs/big bs=1M count=64`)
	fi, err := os.Stat(filepath.Join(w.vol, "threads/ft-sb-disk/user-data/outputs/big"))
	if err != nil || fi.Size() > 8<<20 {
		t.Fatalf("big file: %v, %v (%s)", fi.Size(), err, out)
	}
	// In the home tmpfs: full at its size, in many small files too.
	out = w.fails(s.ID, `i=0; while [ $i -lt 64 ]; do dd if=/dev/zero of=/home/gem/f$i bs=1M count=1 || exit 1; i=$((i+1)); done`)
	if !strings.Contains(out, "No space left") {
		t.Fatalf("filling home: %s", out)
	}
	if got := w.ok(s.ID, `ls /home/gem | grep -c '^f'`); got != "16\n" && got != "17\n" { // 16 whole files, the 17th cut short
		t.Fatalf("home holds %s files of 1 MiB", got)
	}
	healthy(t, w, s.ID)
}

func TestCPUTimeIsLimited(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := limitedSpec(w, "sb-cpu")
	w.ensure(s)
	// A busy loop is stopped by SIGXCPU (exit 128+24) at 2 CPU-seconds.
	res := w.exec(s.ID, `while :; do :; done`, 5*time.Minute)
	if res.TimedOut || res.ExitCode != 152 {
		t.Fatalf("busy loop: %+v %s", res, res.Output)
	}
	healthy(t, w, s.ID)
}

// hostPids reads the sandbox's pids cgroup (v1) from the host.
func hostPids(t *testing.T, w *world, id string) int {
	t.Helper()
	var ci struct{ Id string }
	if err := getJSON(w, "/containers/"+w.b.ContainerName(id)+"/json", &ci); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/sys/fs/cgroup/pids/docker/" + ci.Id + "/pids.current")
	if err != nil {
		t.Fatalf("host cgroup: %v", err)
	}
	var n int
	fmt.Sscan(string(b), &n)
	return n
}
