// Command tool-invoke runs exactly one tool call per
// io.yuxi.tool.call.requested.v1 event (see shared/faas for the runtimes).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "tool-invoke:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "tool-invoke", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	know, err := knowledge.Open(core)
	if err != nil {
		return err
	}
	know.Outputs = sandboxes.Outputs(core) // download_kb_file, when a provisioner is configured
	mcps, skills := mcplayer.Open(core), mcplayer.Skills(ctx, core, know.Blob, nil, nil, nil, false)
	sandboxTools, err := sandboxes.Tools(core, skills, parser.MarkdownFor(cfg)) // on the provisioner, when one is configured (skills written in first)
	if err != nil {
		return err
	}
	kit := chat.Open(core, append(know.Tools(), sandboxTools...)...)
	router := core.Router("tool-invoke")
	toolinvoke.New(kit.Runs, kit.Tools, core.Stream, toolinvoke.Config{Timeout: cfg.ToolTimeout, Crash: cfg.Crasher(), RunTools: mcps, Skills: skills.Gate(),
		Offload: sandboxes.LargeResults(core, know.Blob), LargeResultTokens: cfg.LargeToolResultTokens}, core.Log).Register(router)
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("tool-invoke")})
}
