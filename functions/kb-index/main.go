// Command kb-index chunks, embeds and indexes parsed files on
// io.yuxi.document.parsed.v1.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "kb-index:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	app, err := bootstrap.Open(ctx, cfg, bootstrap.Options{Function: "kb-index", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer app.Close()
	router := app.Router("kb-index")
	k := app.Knowledge
	indexdoc.New(k.KBs, k.Blob, k.Keyword, k.Vectors, k.Models, app.Stream,
		indexdoc.Config{Lease: cfg.FileLease, Crash: cfg.Crasher()}, app.Log).Register(router)
	go app.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("kb-index")})
}
