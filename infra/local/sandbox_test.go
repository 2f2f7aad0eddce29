package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// make run's provisioner: started in-process on bwrap with a generated
// token, reached only through the client.
func TestStartSandboxRunsCommandsOnBwrap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	c, err := local.StartSandbox(ctx, local.SandboxConfig{VolumeDir: filepath.Join(dir, "volume"), CgroupParent: "yuxi-test-" + filepath.Base(filepath.Dir(dir))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Backend != "bwrap" || h.IdleTimeout != 210 {
		t.Fatalf("health %+v %v", h, err)
	}
	scope := sandbox.Scope{UID: "u1", FileThread: "t1"}
	res, err := c.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: "echo hi > ../outputs/a.txt && cat ../outputs/a.txt"})
	if err != nil || res.Output != "hi\n" {
		t.Fatalf("exec %+v %v", res, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "volume", "threads", "t1", "user-data", "outputs", "a.txt")); err != nil || string(got) != "hi\n" {
		t.Fatalf("volume file %q %v", got, err)
	}
}
