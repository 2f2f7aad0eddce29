// Command kb-index chunks, embeds and indexes parsed files on
// io.yuxi.document.parsed.v1.
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
)

func main() {
	bootstrap.Main("kb-index", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		router := core.Router("kb-index")
		indexdoc.New(know.KBs, core.Outbox, know.Blob, know.Keyword, know.Vectors, know.Models, core.Stream,
			indexdoc.Config{Lease: cfg.FileLease, Crash: cfg.Crasher()}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
