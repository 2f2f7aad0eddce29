// Command tool-invoke runs exactly one tool call per
// io.yuxi.tool.call.requested.v1 event (see shared/faas for the runtimes).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

func main() {
	bootstrap.Main("tool-invoke", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		know.Outputs = sandboxes.Outputs(core) // download_kb_file, when a provisioner is configured
		mcps, skills := mcplayer.Open(core), mcplayer.Skills(ctx, core, know.Blob, nil, nil, nil, false)
		sandboxTools, err := sandboxes.Tools(core, skills, parser.MarkdownFor(cfg)) // on the provisioner, when one is configured (skills written in first)
		if err != nil {
			return bootstrap.Served{}, err
		}
		var runs skill.Runs // bound below, before anything runs
		if sandboxTools != nil {
			sandboxTools = append(sandboxTools, skill.InstallTool{Bind: func() (*skill.Service, skill.Runs) { return skills, runs }})
		}
		kit := chat.Open(core, append(know.Tools(), sandboxTools...)...)
		runs = kit.Runs
		router := core.Router("tool-invoke")
		toolinvoke.New(kit.Runs, kit.Tools, core.Stream, toolinvoke.Config{Timeout: cfg.ToolTimeout, Crash: cfg.Crasher(), RunTools: mcps, Skills: skills.Gate(),
			Offload: sandboxes.LargeResults(core, know.Blob), LargeResultTokens: cfg.LargeToolResultTokens}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
