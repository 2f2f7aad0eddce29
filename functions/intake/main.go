// Command intake serves the public HTTP API (HTTP, a Lambda Function URL with response streaming, or Cloud Run).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/identity"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
)

func main() {
	bootstrap.Main("intake", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		parse, err := parser.Open(cfg)
		if err != nil {
			return bootstrap.Served{}, err
		}
		id, err := identity.Open(ctx, core, know.Blob)
		if err != nil {
			return bootstrap.Served{}, err
		}
		kit, hub, mcps := chat.Open(core, know.Tools()...), core.RunHub(ctx), mcplayer.Open(core)
		api := intake.New(intake.Deps{Telemetry: core.Telemetry, Auth: id.Auth, Settings: id.Settings, OIDC: id.OIDC, SysConfig: id.SysConfig, Providers: core.Providers, Guard: id.Guard, Ready: id.Ready, OCREngine: cfg.OCREngine, OCRBaseURL: cfg.OCRBaseURL, Logs: core.Logs, Agents: kit.Agents, Threads: kit.Threads, Queue: kit.Queue,
			Runs: kit.Runs, Tools: kit.Tools, MCP: mcps, Hub: hub, Stream: core.Stream, Log: core.Log, MaxBodyBytes: cfg.MaxBodyBytes, SSEHeartbeat: cfg.SSEHeartbeat,
			SSEMaxDuration: cfg.SSEMaxDuration, SyncWait: cfg.SyncWait, KBs: know.KBs, Retriever: know.Retriever, Blob: know.Blob, Keyword: know.Keyword, Vectors: know.Vectors,
			Outbox: core.Outbox, Parser: parse, NotifyToken: cfg.NotifyToken, ClientAddr: cfg.TrustedProxies, Evaluation: know.Evaluation(), Buckets: know.Buckets, Graph: know.Graph, GraphBuild: know.GraphBuilder(nil, nil), Mindmaps: know.Mindmaps(), Assist: know.Assist(), Outbound: cfg.Outbound().Client(), Sandbox: sandboxes.Client(core), Skills: mcplayer.Skills(ctx, core, know.Blob, kit.Tools, mcps, sandboxes.Client(core), true), Models: core.Providers, ChatImages: id.ChatImages, Tasks: id.Tasks, Dashboard: id.Dashboard, Budgets: kit.Budgets})
		return bootstrap.Served{HTTP: api.Handler()}, nil
	})
}
