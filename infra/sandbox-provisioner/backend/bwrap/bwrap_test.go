package bwrap_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/backendtest"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/bwrap"
)

// newBackend gives each test its own cgroup parent, removed at the end, so
// parallel test processes never see each other's sandboxes.
func newBackend(t *testing.T) backend.Backend {
	t.Helper()
	b, err := bwrap.New(bwrap.Config{CgroupParent: "yuxi-test-" + randHex()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil && os.Geteuid() == 0 && !b.CgroupsAvailable() {
		t.Fatal("cgroup v1 memory and pids are mounted and we are root, but the backend found no writable groups")
	}
	t.Cleanup(func() {
		ids, _ := b.List(context.Background())
		for _, id := range ids {
			_ = b.Destroy(context.Background(), id)
		}
		b.Close()
	})
	return b
}

func randHex() string {
	p := make([]byte, 4)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

func TestContract(t *testing.T) {
	backendtest.Run(t, newBackend, t.TempDir())
}

// TestParkedTrees: each exec runs in a tree set up before its request (see
// park.go); that must not change what a command sees: only fds 0-2, a fresh
// /tmp, the request's own workdir and env (quoted as given) and no env of an
// earlier request, and a mount source made again since the tree was set up.
func TestParkedTrees(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	vol := t.TempDir()
	for _, d := range []string{vol, filepath.Dir(vol)} { // bwrap resolves the binds as the sandbox uid
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	f := backendtest.NewFixture(t, vol, backend.Limits{})
	ctx := t.Context()
	if err := b.Ensure(ctx, f.Spec); err != nil {
		t.Fatal(err)
	}
	exec := func(r backend.ExecRequest) string {
		t.Helper()
		r.Timeout = 30 * time.Second
		res, err := b.Exec(ctx, f.Spec.ID, r)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %v exit %d: %s", r.Command, err, res.ExitCode, res.Output)
		}
		return string(res.Output)
	}
	// The command's shell has only stdin, stdout and stderr (and what the
	// test process itself inherited without close-on-exec) — no fd of the
	// set-up (seccomp, info, block, request).
	for _, line := range strings.Split(exec(backend.ExecRequest{Command: `ls -l /proc/$$/fd`}), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		fd, target := f[len(f)-3], f[len(f)-1]
		if n, _ := strconv.Atoi(fd); n <= 2 {
			continue
		}
		if own, _ := os.Readlink("/proc/self/fd/" + fd); own != target {
			t.Errorf("fd %s -> %s is open in the command", fd, target)
		}
	}
	exec(backend.ExecRequest{Command: `echo x > /tmp/left`})
	if out := exec(backend.ExecRequest{Command: `ls -A /tmp; pwd`, Workdir: backend.OutputsDir}); out != backend.OutputsDir+"\n" {
		t.Errorf("a second exec: %q, want an empty /tmp and the workdir", out)
	}
	odd := `it's "quoted" $HOME ` + "`x`\nline 2"
	if out := exec(backend.ExecRequest{Command: `printf '%s|%s' "$ODD" "$YUXI_TEST_ENV"`, Env: map[string]string{"ODD": odd}}); out != odd+"|from-spec" {
		t.Errorf("env: %q", out)
	}
	if out := exec(backend.ExecRequest{Command: `echo "${ODD-unset}"`}); out != "unset\n" {
		t.Errorf("env of an earlier request leaked: %q", out)
	}
	// The tree's one shell evaluates the command as /bin/sh -c would: $0,
	// no positional parameters, none of the request script's variables,
	// exit status and syntax errors as the command's own.
	if out := exec(backend.ExecRequest{Command: `echo "$0|$#|${__yuxi_command-unset}"`}); out != "/bin/sh|0|unset\n" {
		t.Errorf("the command's shell: %q", out)
	}
	for cmd, code := range map[string]int{"exit 7": 7, "false": 1, "if then": 2, "f() { return 3; }; f": 3} {
		res, err := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != code {
			t.Errorf("%q: %v exit %d, want %d: %s", cmd, err, res.ExitCode, code, res.Output)
		}
	}
	for _, name := range []string{"BAD NAME", "__yuxi_command"} {
		if _, err := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: "true", Env: map[string]string{name: "x"}, Timeout: 30 * time.Second}); err == nil {
			t.Errorf("env name %q was accepted", name)
		}
	}
	// The outputs directory is made again while the next tree is parked:
	// the exec must see the new one.
	exec(backend.ExecRequest{Command: "true"})
	if err := os.RemoveAll(f.Dirs.Outputs); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.Dirs.Outputs, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dirs.Outputs, "new"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := exec(backend.ExecRequest{Command: "ls " + backend.OutputsDir}); out != "new\n" {
		t.Errorf("outputs after it was made again: %q", out)
	}
}
