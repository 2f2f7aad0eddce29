package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisionertest"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

const token = provisionertest.Token

// newWorld starts a real provisioner on the bwrap backend behind an HTTP
// server, and a client of it.
func newWorld(t *testing.T) *provisionertest.World {
	return provisionertest.Start(t, provisioner.Config{GlobalEnv: map[string]string{"GLOBAL_ONE": "g", "SHARED": "global"}})
}

func TestExecAndFilesThroughTheProvisioner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	c := w.Client
	scope := sandbox.Scope{UID: "alice", FileThread: "thread-1"}
	h, err := c.Health(ctx)
	if err != nil || h.Backend != "bwrap" || h.IdleTimeout != 120 {
		t.Fatalf("health %+v %v", h, err)
	}
	// A function writes a script through the file API, the sandbox runs it
	// and writes an output the function reads back.
	if _, err := c.WriteFile(ctx, scope, "outputs/hello.sh", []byte("echo \"hello $1 from $(id -u) $SHARED $GLOBAL_ONE\" > /home/gem/user-data/outputs/result.txt\n"), false); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, scope, map[string]string{"SHARED": "user"}, sandbox.ExecRequest{Command: "sh ../outputs/hello.sh world && cat ../outputs/result.txt"})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("hello world from %d user g\n", backend.SandboxUID)
	if res.ExitCode != 0 || res.Output != want {
		t.Fatalf("exec: %+v, want output %q", res, want)
	}
	data, size, truncated, err := c.ReadFile(ctx, scope, "/home/gem/user-data/outputs/result.txt", 0)
	if err != nil || string(data) != want || size != int64(len(want)) || truncated {
		t.Fatalf("read result: %q %d %v %v", data, size, truncated, err)
	}
	entries, _, err := c.List(ctx, scope, "outputs", 1)
	if err != nil || len(entries) != 2 {
		t.Fatalf("list: %+v %v", entries, err)
	}
	// Exit code, timeout and the output cap come through.
	res, _ = c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "exit 4"})
	if res.ExitCode != 4 {
		t.Fatalf("exit code %+v", res)
	}
	res, _ = c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "sleep 30", Timeout: time.Second})
	if !res.TimedOut {
		t.Fatalf("timeout %+v", res)
	}
	res, _ = c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "head -c 400000 /dev/zero | tr '\\0' a"})
	if len(res.Output) != sandbox.MaxOutput || !res.Truncated {
		t.Fatalf("output cap: %d bytes truncated %v", len(res.Output), res.Truncated)
	}
	// A symlink the sandbox plants never makes the file API read outside.
	res, _ = c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "ln -s /etc/hostname ../outputs/host && ln -s " + w.Volume + " ../outputs/vol && echo ok"})
	if res.Output != "ok\n" {
		t.Fatalf("symlinks: %+v", res)
	}
	for _, p := range []string{"outputs/host", "outputs/vol/threads/shared/alice/workspace"} {
		if _, _, _, err := c.ReadFile(ctx, scope, p, 0); err == nil {
			t.Errorf("read %s through a planted symlink succeeded", p)
		}
	}
	// Another user's scope does not see alice's files.
	if _, _, _, err := c.ReadFile(ctx, sandbox.Scope{UID: "bob", FileThread: "thread-2"}, "outputs/result.txt", 0); !sandbox.IsCode(err, "not_found") {
		t.Fatalf("bob reads alice's output: %v", err)
	}
	if _, err := c.WriteFile(ctx, scope, "/home/gem/skills/x.md", []byte("x"), false); !sandbox.IsCode(err, "read_only") {
		t.Fatalf("write to skills: %v", err)
	}
}

// From inside a sandbox the provisioner (on the host's loopback) is
// unreachable, and nothing of the token is in its environment.
func TestSandboxCannotReachTheProvisioner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(w.Server.URL, "http://"))
	scope := sandbox.Scope{UID: "alice", FileThread: "t-net"}
	res, err := w.Client.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "env; bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port + "' 2>&1 && echo dial-ok || echo dial-failed"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "dial-failed") || strings.Contains(res.Output, "dial-ok") || strings.Contains(res.Output, token) {
		t.Fatalf("sandbox output:\n%s", res.Output)
	}
}

func TestWrongTokenRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	bad, err := sandbox.New(w.Server.URL, strings.Repeat("z", 40), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Ensure(ctx, sandbox.Scope{UID: "a", FileThread: "t"}, nil)
	if fe, ok := failure.As(err); !ok || fe.Kind != failure.KindUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := sandbox.New(w.Server.URL, "short", nil); err == nil {
		t.Fatal("a client with a short token was made")
	}
}

// A provisioner restart forgets its sandboxes and destroys the old ones;
// the client's next exec meets sandbox_not_found, recreates the sandbox
// and the files are still there.
func TestProvisionerRestartKeepsFiles(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	scope := sandbox.Scope{UID: "alice", FileThread: "t-restart"}
	res, err := w.Client.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "echo kept > ../outputs/k.txt"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	w.Restart(t) // a new provisioner process on the same volume, backend and address
	if ids, _ := w.Backend.List(ctx); len(ids) != 0 {
		t.Fatalf("after restart the old sandboxes are left: %v", ids)
	}
	res, err = w.Client.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "cat ../outputs/k.txt"})
	if err != nil || res.Output != "kept\n" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
}

// A provisioner that dies mid-exec fails the call clearly and promptly
// (code sandbox_unavailable), never hangs.
func TestProvisionerKilledMidExec(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	scope := sandbox.Scope{UID: "alice", FileThread: "t-kill"}
	if _, err := w.Client.Ensure(ctx, scope, nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := w.Client.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "echo started > ../outputs/s; sleep 50"})
		errc <- err
	}()
	for {
		if _, err := os.Stat(filepath.Join(w.Volume, "threads", "t-kill", "user-data", "outputs", "s")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.Server.CloseClientConnections()
	err := <-errc
	if !sandbox.IsCode(err, "sandbox_unavailable") {
		t.Fatalf("exec across a dead provisioner: %v", err)
	}
}
