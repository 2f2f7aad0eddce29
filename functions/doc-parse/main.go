// Command doc-parse turns stored files into Markdown on
// io.yuxi.document.uploaded.v1, and applies bucket notifications
// (io.yuxi.bucket.object.changed.v1, Cloud Storage object events).
package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
)

func main() {
	bootstrap.Main("doc-parse", func(ctx context.Context, cfg bootstrap.Config, core *bootstrap.Core) (bootstrap.Served, error) {
		know, err := knowledge.Open(core)
		if err != nil {
			return bootstrap.Served{}, err
		}
		parse, err := parser.Open(cfg)
		if err != nil {
			return bootstrap.Served{}, err
		}
		router := core.Router("doc-parse")
		parsedoc.New(know.KBs, core.Outbox, know.Blob, know.Buckets, parse, know.Keyword, know.Vectors, core.Stream,
			parsedoc.Config{Lease: cfg.FileLease, Crash: cfg.Crasher()}, core.Log).Register(router)
		return bootstrap.Served{Router: router}, nil
	})
}
