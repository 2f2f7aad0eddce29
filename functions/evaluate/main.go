// Command evaluate runs RAG evaluation batches, generates benchmark datasets
// and starts scheduled evaluations (the evaluate function).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/evaluate/evaluate"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
)

func main() {
	bootstrap.Main("evaluate", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		router := core.Router("evaluate")
		// Agent evaluation suites run samples through the normal run path and wait on the runs' streams.
		evals := know.Evaluation().WithAgents(chat.Open(core).Invoker(core, core.RunHub(ctx)))
		evaluate.New(evals, evaluate.Config{Crash: cfg.Crasher()}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
