// Command intake serves the public HTTP API (HTTP, a Lambda Function URL with response streaming, or Cloud Run).
package main

import (
	"context"
	"fmt"
	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/identity"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"os"
	"os/signal"
	"syscall"
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
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "intake", Sync: rt != faas.RuntimeHTTP})
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
	id, err := identity.Open(ctx, core, know.Blob)
	if err != nil {
		return err
	}
	kit, hub, mcps := chat.Open(core, know.Tools()...), core.RunHub(ctx), mcplayer.Open(core)
	api := intake.New(intake.Deps{Telemetry: core.Telemetry, Auth: id.Auth, Settings: id.Settings, OIDC: id.OIDC, SysConfig: id.SysConfig, Providers: core.Providers, Guard: id.Guard, Ready: id.Ready, OCREngine: cfg.OCREngine, OCRBaseURL: cfg.OCRBaseURL, Logs: core.Logs, Agents: kit.Agents, Threads: kit.Threads, Queue: kit.Queue,
		Runs: kit.Runs, Tools: kit.Tools, MCP: mcps, Hub: hub, Stream: core.Stream, Log: core.Log, MaxBodyBytes: cfg.MaxBodyBytes, SSEHeartbeat: cfg.SSEHeartbeat,
		SSEMaxDuration: cfg.SSEMaxDuration, SyncWait: cfg.SyncWait, KBs: know.KBs, Retriever: know.Retriever, Blob: know.Blob, Keyword: know.Keyword, Vectors: know.Vectors,
		Outbox: core.Outbox, Parser: parse, NotifyToken: cfg.NotifyToken, ClientAddr: cfg.TrustedProxies, Evaluation: know.Evaluation(), Buckets: know.Buckets, Graph: know.Graph, GraphBuild: know.GraphBuilder(nil, nil), Mindmaps: know.Mindmaps(), Sandbox: sandboxes.Client(core), Skills: mcplayer.Skills(ctx, core, know.Blob, kit.Tools, mcps, sandboxes.Client(core), true), Models: core.Providers, ChatImages: id.ChatImages, Tasks: id.Tasks, Dashboard: id.Dashboard, Budgets: kit.Budgets})
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, HTTP: api.Handler(), OnReady: bootstrap.Ready("intake")})
}
