// Package provisionertest starts a real sandbox provisioner on the bwrap
// backend for a test: its own volume (made traversable for the sandbox
// uid), its own cgroup parent (so parallel test processes never clean up
// each other's sandboxes), an HTTP server and a client with the token.
// Everything is torn down at the test's end.
//
// Imported by: tests only. May import: anything.
package provisionertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/bwrap"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// Token is the provisioner token of every World.
const Token = "provisioner-test-token-0123456789abcdef"

// World is a running provisioner.
type World struct {
	Volume  string // the volume directory (threads/… below it)
	Backend *bwrap.Backend
	Prov    *provisioner.Provisioner
	Server  *httptest.Server
	Client  *sandbox.Client

	cfg     provisioner.Config
	handler atomic.Pointer[http.Handler]
}

// Start starts a world; cfg's Token, VolumeDir and SandboxOwner are set
// here (ExecTimeout defaults to 60s).
func Start(t testing.TB, cfg provisioner.Config) *World {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/"; d = filepath.Dir(d) { // bwrap, as the sandbox uid, traverses to its binds
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	if cfg.ExecTimeout == 0 {
		cfg.ExecTimeout = 60 * time.Second
	}
	be, err := bwrap.New(bwrap.Config{CgroupParent: "yuxi-test-" + randHex(), ExecTimeout: cfg.ExecTimeout})
	if err != nil {
		t.Fatal(err)
	}
	w := &World{Volume: filepath.Join(dir, "volume"), Backend: be, cfg: cfg}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { (*w.handler.Load()).ServeHTTP(rw, r) }))
	t.Cleanup(func() {
		w.Server.Close()
		ids, _ := be.List(context.Background())
		for _, id := range ids {
			_ = be.Destroy(context.Background(), id)
		}
		be.Close()
	})
	w.Restart(t)
	if w.Client, err = sandbox.New(w.Server.URL, Token, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// Restart replaces the provisioner behind the same address with a new one
// on the same volume and backend, as a restarted process: it forgets its
// sandboxes and destroys what the backend still has.
func (w *World) Restart(t testing.TB) {
	t.Helper()
	cfg := w.cfg
	cfg.Token, cfg.VolumeDir = Token, w.Volume
	cfg.SandboxOwner = volume.Owner{UID: -1, GID: -1}
	if os.Geteuid() == 0 {
		cfg.SandboxOwner = volume.Owner{UID: backend.SandboxUID, GID: backend.SandboxGID}
	}
	p, err := provisioner.New(cfg, w.Backend)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Prov = p
	h := p.Handler()
	w.handler.Store(&h)
}

// HostPath is where a scope's sandbox path lives on the volume.
func (w *World) HostPath(s sandbox.Scope, sandboxPath string) string {
	sc, err := volume.Scope{UID: s.UID, FileThread: s.FileThread, SkillsThread: s.SkillsThread}.Normalize()
	if err != nil {
		panic(err)
	}
	d := volume.Layout{Root: w.Volume}.DirsOf(sc)
	for prefix, host := range map[string]string{sandbox.WorkspaceDir: d.Workspace, sandbox.UploadsDir: d.Uploads, sandbox.OutputsDir: d.Outputs, sandbox.SkillsDir: d.Skills} {
		if rest, ok := cutPrefix(sandboxPath, prefix); ok {
			return filepath.Join(host, rest)
		}
	}
	panic("not a sandbox path: " + sandboxPath)
}

func cutPrefix(p, prefix string) (string, bool) {
	if p == prefix {
		return "", true
	}
	if len(p) > len(prefix) && p[:len(prefix)+1] == prefix+"/" {
		return p[len(prefix)+1:], true
	}
	return "", false
}

func randHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
