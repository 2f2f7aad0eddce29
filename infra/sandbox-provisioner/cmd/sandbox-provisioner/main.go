// Command sandbox-provisioner is the standing sandbox service (Knative
// Service with min-scale 1, ECS service, Cloud Run min-instances): it reads
// its configuration from the environment, cleans up sandboxes a previous
// process left, runs the idle reaper and serves the API on PORT (8002).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/bwrap"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/memory"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-provisioner:", err)
		os.Exit(1)
	}
}

// backends builds the backend PROVISIONER_BACKEND names.
var backends = map[string]func(getenv func(string) string, execTimeout time.Duration, limits backend.Limits) (backend.Backend, error){
	"bwrap": func(getenv func(string) string, execTimeout time.Duration, limits backend.Limits) (backend.Backend, error) {
		return bwrap.New(bwrap.Config{ExecTimeout: execTimeout, Limits: limits, CgroupParent: getenv("SANDBOX_CGROUP_PARENT")})
	},
	"memory": func(func(string) string, time.Duration, backend.Limits) (backend.Backend, error) {
		return memory.New(), nil
	},
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, name, err := config(getenv)
	if err != nil {
		return err
	}
	mk, ok := backends[name]
	if !ok {
		return fmt.Errorf("PROVISIONER_BACKEND %q is not one of bwrap, memory", name)
	}
	be, err := mk(getenv, cfg.ExecTimeout, cfg.Limits)
	if err != nil {
		return err
	}
	p, err := provisioner.New(cfg, be)
	if err != nil {
		return err
	}
	if _, err := p.Recover(ctx); err != nil {
		return err
	}
	go p.RunReaper(ctx)
	port := getenv("PORT")
	if port == "" {
		port = "8002"
	}
	srv := &http.Server{Addr: ":" + port, Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("sandbox provisioner listening", "port", port, "backend", be.Name(), "idle_timeout", cfg.IdleTimeout)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	p.Shutdown(shutdown)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// config reads the environment (the original's variable names).
func config(getenv func(string) string) (provisioner.Config, string, error) {
	seconds := func(name string, def int) (time.Duration, error) {
		v := getenv(name)
		if v == "" {
			return time.Duration(def) * time.Second, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s=%q is not a positive number of seconds", name, v)
		}
		return time.Duration(n) * time.Second, nil
	}
	integer := func(name string) (int64, error) {
		v := getenv(name)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
		}
		return n, nil
	}
	var cfg provisioner.Config
	var err error
	cfg.Token = getenv("SANDBOX_PROVISIONER_TOKEN")
	if cfg.ExecTimeout, err = seconds("SANDBOX_EXEC_TIMEOUT_SECONDS", 180); err != nil {
		return cfg, "", err
	}
	if cfg.IdleTimeout, err = seconds("SANDBOX_IDLE_TIMEOUT_SECONDS", 120); err != nil {
		return cfg, "", err
	}
	if getenv("SANDBOX_IDLE_CHECK_INTERVAL_SECONDS") != "" {
		if cfg.IdleCheck, err = seconds("SANDBOX_IDLE_CHECK_INTERVAL_SECONDS", 10); err != nil {
			return cfg, "", err
		}
	}
	maxOut, err := integer("SANDBOX_MAX_OUTPUT_BYTES")
	if err != nil {
		return cfg, "", err
	}
	cfg.MaxOutput = int(maxOut)
	for name, dst := range map[string]*int64{
		"SANDBOX_MEMORY_LIMIT_BYTES": &cfg.Limits.MemoryBytes, "SANDBOX_PIDS_LIMIT": &cfg.Limits.Pids,
		"SANDBOX_CPU_SECONDS": &cfg.Limits.CPUSeconds, "SANDBOX_FILE_SIZE_LIMIT_BYTES": &cfg.Limits.FileSizeBytes,
		"SANDBOX_MAX_FILE_BYTES": &cfg.MaxFileBytes,
	} {
		if *dst, err = integer(name); err != nil {
			return cfg, "", err
		}
	}
	cfg.VolumeDir = getenv("SANDBOX_VOLUME_DIR")
	if cfg.VolumeDir == "" {
		cfg.VolumeDir = ".yuxi/sandbox"
	}
	cfg.SandboxOwner = volume.Owner{UID: -1, GID: -1}
	if os.Geteuid() == 0 {
		cfg.SandboxOwner = volume.Owner{UID: backend.SandboxUID, GID: backend.SandboxGID}
	}
	if f := getenv("SANDBOX_ENV_FILE"); f != "" {
		if cfg.GlobalEnv, err = readEnvFile(f); err != nil {
			return cfg, "", err
		}
	}
	name := getenv("PROVISIONER_BACKEND")
	if name == "" {
		name = "bwrap"
		if runtime.GOOS != "linux" {
			name = "memory"
		}
	}
	return cfg, name, cfg.Validate()
}

// readEnvFile reads KEY=VALUE lines (# comments, blank lines) of the
// global sandbox env (the original's sandbox.env). It must never hold a
// platform secret; the provisioner refuses one holding its own token.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("SANDBOX_ENV_FILE: %w", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("SANDBOX_ENV_FILE %s:%d: not KEY=VALUE", path, n)
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return env, sc.Err()
}
