// Command dispatcher handles io.yuxi.run.finished.v1 (close the run's stream,
// dispatch the thread's next request) and scheduled sweeps
// (io.yuxi.dispatcher.sweep.requested.v1 or a Knative PingSource tick).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
)

func main() {
	bootstrap.Main("dispatcher", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		kit := chat.Open(core, know.Tools()...)
		router := core.Router("dispatcher")
		dispatcher.New(kit.Runs, kit.Queue, core.Relay,
			dispatcher.Config{Sweep: runs.SweepConfig{Stale: cfg.SweepStale}, Crash: cfg.Crasher(), Files: know.FileSweeper(), Subagents: kit.Subagents, Budgets: kit.Budgets}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
