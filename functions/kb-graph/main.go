// Command kb-graph extracts the knowledge graph of indexed files on
// io.yuxi.document.indexed.v1.
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/kb-graph/graphbuild"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
)

func main() {
	bootstrap.Main("kb-graph", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		router := core.Router("kb-graph")
		graphbuild.New(know.GraphBuilder(nil, cfg.Crasher()), core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
