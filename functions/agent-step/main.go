// Command agent-step runs one model turn of a run per io.yuxi.agent.step.ready.v1
// event, as a CloudEvents HTTP receiver (Knative, Cloud Run), a Lambda or a
// Cloud Run function (see shared/faas).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/sandboxes"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/kbtool/kbspec"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "agent-step:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "agent-step", Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	// The model is offered the knowledge tools (and, with a sandbox
	// provisioner, the file-system and sandbox tools); tool-invoke runs them.
	specs := kbspec.All()
	if cfg.SandboxURL != "" {
		specs = append(specs, sandboxtool.Specs()...)
	}
	kit := chat.Open(core, chat.Offered(specs...)...)
	router := core.Router("agent-step")
	// The MCP layer fixes each run's tools at its first step (the manifest).
	// The Skills service fixes each run's skills and gates their tools.
	mcps := mcplayer.Open(core)
	skills := mcplayer.Skills(ctx, core, nil, kit.Tools, mcps, nil, false).Gate()
	agentstep.New(kit.Runs, core.Providers, kit.Tools, core.Stream,
		agentstep.Config{WorkerID: cfg.WorkerID, Lease: cfg.StepLease, Crash: cfg.Crasher(), RunTools: mcps, Summaries: kit.Summaries, Skills: skills, Guard: kit.Guard, Budgets: kit.Budgets, Workspace: sandboxes.Workspace(core), Steers: kit.Queue}, core.Log).Register(router)
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: router, OnReady: bootstrap.Ready("agent-step")})
}
