package docker_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// TestProvisionerOnDocker: the provisioner service on the docker backend,
// through the functions' client: create with a user's env, exec, files
// read from the volume without the sandbox, a restarted provisioner
// cleaning up and the next call recreating the sandbox with its files.
func TestProvisionerOnDocker(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	const token = "docker-provisioner-test-token-0123456789"
	start := func() *httptest.Server {
		owner := volume.Owner{UID: -1, GID: -1}
		if os.Geteuid() == 0 {
			owner = volume.Owner{UID: backend.SandboxUID, GID: backend.SandboxGID}
		}
		p, err := provisioner.New(provisioner.Config{Token: token, VolumeDir: w.vol, SandboxOwner: owner, ExecTimeout: time.Minute}, w.b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	srv := start()
	c, err := sandbox.New(srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if h, err := c.Health(ctx); err != nil || h.Backend != "docker" {
		t.Fatalf("health %+v %v", h, err)
	}
	scope := sandbox.Scope{UID: "alice", FileThread: "thread-1"}
	res, err := c.Exec(ctx, scope, map[string]string{"MY_VAR": "mine"}, sandbox.ExecRequest{Command: `id -u; echo "$MY_VAR" > ../outputs/r.txt; ls /sys/class/net`})
	if err != nil || res.ExitCode != 0 || res.Output != "1000\nlo\n" {
		t.Fatalf("exec %+v %v", res, err)
	}
	data, _, _, err := c.ReadFile(ctx, scope, backend.OutputsDir+"/r.txt", 1<<20)
	if err != nil || string(data) != "mine\n" {
		t.Fatalf("read file %q %v", data, err)
	}
	ids, err := w.b.List(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("containers %v %v", ids, err)
	}
	// A restarted provisioner destroys what its predecessor left; the next
	// call recreates the sandbox, with its files.
	srv2 := start()
	if ids, _ := w.b.List(ctx); len(ids) != 0 {
		t.Fatalf("after restart: %v", ids)
	}
	c2, err := sandbox.New(srv2.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = c2.Exec(ctx, scope, nil, sandbox.ExecRequest{Command: `cat ` + backend.OutputsDir + `/r.txt`})
	if err != nil || res.Output != "mine\n" {
		t.Fatalf("after restart: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(w.vol, "threads")); err != nil {
		t.Fatal(err)
	}
}
