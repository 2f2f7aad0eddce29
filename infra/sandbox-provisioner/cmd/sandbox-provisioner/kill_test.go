package main_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

const token = "kill-test-token-0123456789abcdef0123456789"

// A provisioner SIGKILLed mid-exec: the call fails at once with
// sandbox_unavailable (never hangs), the command dies with it (nothing
// left in the sandbox's cgroup), and the next provisioner process on the
// same volume destroys the leftover sandbox and serves the files again.
func TestSIGKILLMidExec(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		t.Skip("no cgroup v1 pids hierarchy on this host") // the CI host has one
	}
	bin := testkit.Build(t, "./infra/sandbox-provisioner/cmd/sandbox-provisioner")
	dir := t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	parent := "yuxi-kill-" + hex.EncodeToString(b)
	env := testkit.Env{"SANDBOX_PROVISIONER_TOKEN": token, "PROVISIONER_BACKEND": "bwrap", "SANDBOX_VOLUME_DIR": filepath.Join(dir, "volume"),
		"SANDBOX_CGROUP_PARENT": parent, "PORT": testkit.FreePort(t)}
	p1 := testkit.StartProc(t, bin, env, "/health")
	c, err := sandbox.New(p1.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scope := sandbox.Scope{UID: "alice", FileThread: "t-kill"}
	sb, err := c.Ensure(ctx, scope, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "echo started > ../outputs/s; sleep 120"})
		errc <- err
	}()
	started := filepath.Join(dir, "volume", "threads", "t-kill", "user-data", "outputs", "s")
	// Wait for the content, not the file: the shell creates the file before
	// it writes, and a kill between the two would leave it empty.
	waitFor(t, "the command to start", func() bool { b, err := os.ReadFile(started); return err == nil && string(b) == "started\n" })
	group := filepath.Join(ownPidsGroup(t), parent, sb.ID)
	if n := procsBelow(group); n == 0 {
		t.Fatalf("no process in %s while the command runs", group)
	}
	p1.Kill()
	select {
	case err := <-errc:
		if !sandbox.IsCode(err, "sandbox_unavailable") {
			t.Fatalf("exec across a killed provisioner: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("exec hung after the provisioner was killed")
	}
	waitFor(t, "the sandbox's processes to die with the provisioner", func() bool { return procsBelow(group) == 0 })
	if _, err := os.Stat(group); err != nil {
		t.Fatalf("the killed provisioner's sandbox group is already gone: %v", err)
	}

	p2 := testkit.StartProc(t, bin, env, "/health")
	if _, err := os.Stat(group); !os.IsNotExist(err) {
		t.Fatalf("the restarted provisioner left its predecessor's sandbox group: %v", err)
	}
	c2, _ := sandbox.New(p2.URL, token, nil)
	res, err := c2.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "cat ../outputs/s"})
	if err != nil || res.Output != "started\n" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	// A clean stop (SIGTERM) destroys the sandboxes and removes the groups.
	if err := p2.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p2.Exited(30 * time.Second) {
		t.Fatal("the provisioner did not stop on SIGTERM")
	}
	if _, err := os.Stat(filepath.Join(ownPidsGroup(t), parent)); !os.IsNotExist(err) {
		t.Fatalf("a cleanly stopped provisioner left its cgroup parent: %v\n%s", err, p2.Logs.String())
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownPidsGroup is this process's pids cgroup directory (children start in it).
func ownPidsGroup(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "pids" {
			return filepath.Join("/sys/fs/cgroup/pids", parts[2])
		}
	}
	t.Fatal("no pids cgroup")
	return ""
}

func procsBelow(root string) int {
	n := 0
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil {
				n += len(strings.Fields(string(b)))
			}
		}
		return nil
	})
	return n
}
