// Package mcplayer opens the MCP tool layer (shared/mcp) for the functions
// that use it — agent-step (run manifests), tool-invoke (MCP calls) and
// intake (server administration) — so that no other function links the MCP
// SDK.
//
// Imported by: functions/agent-step, functions/tool-invoke, functions/intake,
// infra/local. May import: shared/bootstrap, shared/mcp.
package mcplayer

import (
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/mcp"
)

// Open opens the MCP layer: server headers sealed with the core's keyring,
// every connection through the SSRF guard (YUXI_OUTBOUND_ALLOW). Its
// sessions are closed with the core.
func Open(core *bootstrap.Core) *mcp.Toolset {
	ts := mcp.Open(core.Pool, core.Secrets, core.Config.Outbound(), core.Log)
	core.OnClose(ts.Pool().Close)
	return ts
}
