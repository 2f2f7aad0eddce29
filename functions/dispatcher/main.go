// Command dispatcher handles io.yuxi.run.finished.v1 (close the run's stream,
// dispatch the thread's next request) and scheduled sweeps
// (io.yuxi.dispatcher.sweep.requested.v1 or a Knative PingSource tick).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "dispatcher:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "dispatcher", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	know, err := knowledge.Open(core)
	if err != nil {
		return err
	}
	kit := chat.Open(core, know.Tools()...)
	router := core.Router("dispatcher")
	dispatcher.New(kit.Runs, kit.Queue, core.Relay,
		dispatcher.Config{Sweep: runs.SweepConfig{Stale: cfg.SweepStale}, Crash: cfg.Crasher(), Files: know.FileSweeper(), Subagents: kit.Subagents}, core.Log).Register(router)
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("dispatcher")})
}
