// Command sandbox-exec-agent runs inside a Kubernetes sandbox pod and
// executes commands for the sandbox provisioner (see package execagent).
// Configuration, from the pod's environment the kube backend sets:
// EXEC_AGENT_ADDR (default :8080), SANDBOX_EXEC_TIMEOUT_SECONDS (180),
// SANDBOX_CPU_SECONDS and SANDBOX_FILE_SIZE_BYTES (per-command rlimits).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube/execagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	num := func(name string, def int64) (int64, error) {
		v := getenv(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q: want a non-negative integer", name, v)
		}
		return n, nil
	}
	timeout, err := num("SANDBOX_EXEC_TIMEOUT_SECONDS", 180)
	if err != nil {
		return err
	}
	cpu, err := num("SANDBOX_CPU_SECONDS", 0)
	if err != nil {
		return err
	}
	fsize, err := num("SANDBOX_FILE_SIZE_BYTES", 0)
	if err != nil {
		return err
	}
	addr := getenv("EXEC_AGENT_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	srv := &http.Server{Addr: addr, Handler: execagent.New(execagent.Config{
		Timeout: time.Duration(timeout) * time.Second, CPUSeconds: cpu, FileSizeBytes: fsize,
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
