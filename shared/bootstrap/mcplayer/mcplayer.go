// Package mcplayer opens the extension layers of the tool system for the
// functions that use them — agent-step (run manifests, skill gating),
// tool-invoke (MCP calls, skills written into sandboxes) and intake (server
// and skill administration): the MCP layer (shared/mcp), so that no other
// function links the MCP SDK, and the Skills service (shared/skill).
//
// Imported by: functions/agent-step, functions/tool-invoke, functions/intake,
// infra/local. May import: shared/bootstrap, shared/blob, shared/mcp,
// shared/sandbox, shared/skill.
package mcplayer

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/blob"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

// Open opens the MCP layer: server headers sealed with the core's keyring,
// every connection through the SSRF guard (YUXI_OUTBOUND_ALLOW). Its
// sessions are closed with the core.
func Open(core *bootstrap.Core) *mcp.Toolset {
	ts := mcp.Open(core.Pool, core.Secrets, core.Config.Outbound(), core.Log)
	core.OnClose(ts.Pool().Close)
	return ts
}

// Skills opens the Skills service (shared/skill): shared skills' files in store (nil where only the
// index is read), personal skills through the sandbox provisioner (ws; nil:
// the one SANDBOX_PROVISIONER_URL names, if any), dependencies checked
// against tools and the MCP layer, remote sources fetched through the SSRF
// guard from YUXI_SKILL_SOURCE_HOSTS. sync writes the built-in skills
// (idempotent; a failure is logged, the service still opens).
func Skills(ctx context.Context, core *bootstrap.Core, store blob.Store, tools skill.Tools, mcps *mcp.Toolset, ws *sandbox.Client, sync bool) *skill.Service {
	cfg := core.Config
	if ws == nil && cfg.SandboxURL != "" {
		ws, _ = sandbox.New(cfg.SandboxURL, cfg.SandboxToken, nil) // validated by bootstrap.Load
	}
	var workspace skill.Workspace
	if ws != nil {
		workspace = ws
	}
	var servers skill.MCPServers
	if mcps != nil {
		servers = func(ctx context.Context) ([]string, error) {
			all, err := mcps.Store().List(ctx)
			var out []string
			for _, s := range all {
				if s.Enabled {
					out = append(out, s.Slug)
				}
			}
			return out, err
		}
	}
	svc := skill.New(core.Pool, store, workspace, tools, servers,
		skill.Config{Remote: skill.RemoteFor(cfg.SkillSourceHosts, cfg.Outbound().Client())}, core.Log)
	if sync && store != nil {
		if _, err := svc.SyncBuiltins(ctx, "system"); err != nil {
			core.Log.Warn("sync built-in skills", "error", err)
		}
	}
	return svc
}
