// Command yuxi-server runs the whole platform in one process on the embedded
// defaults (PostgreSQL + Redis): `make run`.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "yuxi-server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "5050")
	if err != nil {
		return err
	}
	if getenv("YUXI_CREATE_DATABASE") == "" {
		cfg.CreateDatabase = true // a fresh machine has the server but not the database
	}
	if cfg.EncryptionKey == "" && cfg.EncryptionKeyFile == "" {
		cfg.EncryptionKeyFile = ".yuxi/encryption.key" // generated on first start, next to the objects; never in the database
	}
	sb, execTimeout, err := startSandbox(ctx, getenv)
	if err != nil {
		return err
	}
	if cfg.ToolTimeout <= execTimeout {
		return fmt.Errorf("YUXI_TOOL_TIMEOUT (%s) must be above SANDBOX_EXEC_TIMEOUT_SECONDS (%s): a command would outlive its tool call", cfg.ToolTimeout, execTimeout)
	}
	h, err := sb.Health(ctx)
	if err != nil {
		return err
	}
	// The web UI (make web builds web/dist; YUXI_WEB_DIR elsewhere, "off" for none).
	webDir := getenv("YUXI_WEB_DIR")
	if webDir == "" {
		webDir = "web/dist"
	}
	opts := []local.Option{local.WithSandbox(sb, sandboxtool.Config{ExecTimeout: execTimeout})}
	if webDir != "off" {
		opts = append(opts, local.WithWeb(webDir))
	}
	p, err := local.New(ctx, cfg, opts...)
	if err != nil {
		return err
	}
	return p.Run(ctx, ":"+cfg.Port, func(a net.Addr) {
		fmt.Fprintf(os.Stderr, "yuxi: ready, web UI and API on http://%s (all functions in one process; sandbox provisioner backend %s)\n", a, h.Backend)
	})
}

// startSandbox starts the sandbox provisioner in this process (or uses
// SANDBOX_PROVISIONER_URL's).
func startSandbox(ctx context.Context, getenv func(string) string) (*sandbox.Client, time.Duration, error) {
	seconds := func(name string) (time.Duration, error) {
		v := getenv(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s=%q is not a positive number of seconds", name, v)
		}
		return time.Duration(n) * time.Second, nil
	}
	exec, err := seconds("SANDBOX_EXEC_TIMEOUT_SECONDS")
	if err != nil {
		return nil, 0, err
	}
	if exec == 0 {
		exec = 180 * time.Second
	}
	idle, err := seconds("SANDBOX_IDLE_TIMEOUT_SECONDS")
	if err != nil {
		return nil, 0, err
	}
	c, err := local.StartSandbox(ctx, local.SandboxConfig{URL: getenv("SANDBOX_PROVISIONER_URL"), Token: getenv("SANDBOX_PROVISIONER_TOKEN"),
		Backend: getenv("PROVISIONER_BACKEND"), VolumeDir: getenv("SANDBOX_VOLUME_DIR"), ExecTimeout: exec, IdleTimeout: idle,
		CgroupParent: getenv("SANDBOX_CGROUP_PARENT")})
	return c, exec, err
}
