package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	knowledgeopen "github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
)

// benchApp is a process's services opened as the function mains open them:
// the core (its fields promoted), the knowledge engines and the run side.
type benchApp struct {
	*bootstrap.Core
	*chat.Kit
	Knowledge *knowledgeopen.Engines
}

// openApp opens a benchApp; Close (the core's) releases it.
func openApp(ctx context.Context, cfg bootstrap.Config, opt bootstrap.Options) (*benchApp, error) {
	core, err := bootstrap.OpenCore(ctx, cfg, opt)
	if err != nil {
		return nil, err
	}
	k, err := knowledgeopen.Open(core)
	if err != nil {
		core.Close()
		return nil, err
	}
	return &benchApp{Core: core, Kit: chat.Open(core, k.Tools()...), Knowledge: k}, nil
}
