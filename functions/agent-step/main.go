// Command agent-step runs one model turn of a run per io.yuxi.agent.step.ready.v1
// event, as a CloudEvents HTTP receiver (Knative, Cloud Run), a Lambda or a
// Cloud Run function (see shared/faas).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
	"github.com/yuxi-serverless/yuxi/shared/kbtool/kbspec"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/skill"
)

func main() {
	bootstrap.Main("agent-step", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		// The model is offered the knowledge tools (and, with a sandbox
		// provisioner, the file-system and sandbox tools); tool-invoke runs them.
		specs := kbspec.All()
		if cfg.SandboxURL != "" {
			specs = append(specs, sandboxtool.Specs()...)
			specs = append(specs, skill.InstallTool{}.Spec())
		}
		kit := chat.Open(core, chat.Offered(specs...)...)
		router := core.Router("agent-step")
		// The MCP layer fixes each run's tools at its first step (the manifest).
		// The Skills service fixes each run's skills and gates their tools.
		mcps := mcplayer.Open(core)
		skills := mcplayer.Skills(ctx, core, nil, kit.Tools, mcps, nil, false).Gate()
		agentstep.New(kit.Runs, core.Providers, kit.Tools, core.Stream,
			agentstep.Config{WorkerID: cfg.WorkerID, Lease: cfg.StepLease, Crash: cfg.Crasher(), RunTools: mcps, Summaries: kit.Summaries, Skills: skills, Guard: kit.Guard, Budgets: kit.Budgets, Workspace: sandboxes.Workspace(core), Steers: kit.Queue}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
