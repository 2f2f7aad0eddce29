// Command intake serves the public HTTP API (an HTTP service, a Lambda
// Function URL with response streaming, or a Cloud Run function).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "intake:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	app, err := bootstrap.Open(ctx, cfg, bootstrap.Options{Function: "intake", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer app.Close()
	authSvc, err := app.Auth(ctx)
	if err != nil {
		return err
	}
	api := intake.New(intake.Deps{Pool: app.Pool, Auth: authSvc, Agents: app.Agents, Threads: app.Threads, Queue: app.Queue,
		Runs: app.Runs, Tools: app.Tools, Hub: app.Hub, Stream: app.Stream, Log: app.Log,
		MaxBodyBytes: cfg.MaxBodyBytes, SSEHeartbeat: cfg.SSEHeartbeat, KBs: app.Knowledge.KBs, Retriever: app.Knowledge.Retriever,
		Blob: app.Knowledge.Blob, Keyword: app.Knowledge.Keyword, Vectors: app.Knowledge.Vectors, Outbox: app.Outbox, Parser: app.Knowledge.Parser, NotifyToken: cfg.NotifyToken})
	go app.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	go app.Hub.Run(ctx)   //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, HTTP: api.Handler(), OnReady: bootstrap.Ready("intake")})
}
