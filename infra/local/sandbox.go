package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/bwrap"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/memory"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// SandboxConfig configures the sandbox provisioner `make run` starts in
// its own process (a goroutine with its own loopback listener, as the
// standing service would be), or names an external one.
type SandboxConfig struct {
	URL, Token  string        // SANDBOX_PROVISIONER_URL / _TOKEN: use that provisioner instead of starting one
	Backend     string        // PROVISIONER_BACKEND: bwrap (default) or memory
	VolumeDir   string        // SANDBOX_VOLUME_DIR (default .yuxi/sandbox)
	ExecTimeout time.Duration // SANDBOX_EXEC_TIMEOUT_SECONDS (180s)
	IdleTimeout time.Duration // SANDBOX_IDLE_TIMEOUT_SECONDS (120s, at least exec + 30s)
	// CgroupParent (SANDBOX_CGROUP_PARENT, default yuxi-sandboxes) holds
	// the sandboxes' groups; the provisioner destroys every sandbox it
	// finds there at start, so two provisioners (tests) need two parents.
	CgroupParent string
}

// StartSandbox returns a client of the provisioner: the configured one, or
// one started here on 127.0.0.1 with a freshly generated token that only
// this process knows. The provisioner stops when ctx ends.
func StartSandbox(ctx context.Context, cfg SandboxConfig) (*sandbox.Client, error) {
	if cfg.URL != "" {
		return sandbox.New(cfg.URL, cfg.Token, nil)
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(tok[:])
	var be backend.Backend
	switch cfg.Backend {
	case "", "bwrap":
		b, err := bwrap.New(bwrap.Config{ExecTimeout: cfg.ExecTimeout, CgroupParent: cfg.CgroupParent})
		if err != nil {
			return nil, fmt.Errorf("sandbox provisioner: %w (make sandbox-tools installs it)", err)
		}
		be = b
	case "memory":
		be = memory.New()
	default:
		return nil, fmt.Errorf("PROVISIONER_BACKEND %q: the local runner embeds bwrap and memory; run another backend as its own service and set SANDBOX_PROVISIONER_URL", cfg.Backend)
	}
	dir := cfg.VolumeDir
	if dir == "" {
		dir = filepath.Join(".yuxi", "sandbox")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	owner := volume.Owner{UID: -1, GID: -1}
	if os.Geteuid() == 0 {
		owner = volume.Owner{UID: backend.SandboxUID, GID: backend.SandboxGID}
	}
	p, err := provisioner.New(provisioner.Config{Token: token, VolumeDir: dir, SandboxOwner: owner,
		ExecTimeout: cfg.ExecTimeout, IdleTimeout: cfg.IdleTimeout}, be)
	if err != nil {
		return nil, err
	}
	if _, err := p.Recover(ctx); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go p.RunReaper(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "sandbox provisioner:", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		p.Shutdown(sctx)
		if b, ok := be.(*bwrap.Backend); ok {
			b.Close()
		}
	}()
	return sandbox.New("http://"+ln.Addr().String(), token, nil)
}
