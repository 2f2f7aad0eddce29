// Command evaluate runs RAG evaluation batches, generates benchmark datasets
// and starts scheduled evaluations (the evaluate function).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/evaluate/evaluate"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "evaluate:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "evaluate", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	know, err := knowledge.Open(core)
	if err != nil {
		return err
	}
	router := core.Router("evaluate")
	// Agent evaluation suites run samples through the normal run path and wait on the runs' streams.
	evals := know.Evaluation().WithAgents(chat.Open(core).Invoker(core, core.RunHub(ctx)))
	evaluate.New(evals, evaluate.Config{Crash: cfg.Crasher()}, core.Log).Register(router)
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("evaluate")})
}
