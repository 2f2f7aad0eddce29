// Command doc-parse turns stored files into Markdown on
// io.yuxi.document.uploaded.v1, and applies bucket notifications
// (io.yuxi.bucket.object.changed.v1, Cloud Storage object events).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "doc-parse:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "doc-parse", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	know, err := knowledge.Open(core)
	if err != nil {
		return err
	}
	parse, err := parser.Open(cfg)
	if err != nil {
		return err
	}
	router := core.Router("doc-parse")
	parsedoc.New(know.KBs, core.Outbox, know.Blob, know.Buckets, parse, know.Keyword, know.Vectors, core.Stream,
		parsedoc.Config{Lease: cfg.FileLease, Crash: cfg.Crasher()}, core.Log).Register(router)
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("doc-parse")})
}
