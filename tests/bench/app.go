package main

import (
	"context"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	knowledgeopen "github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
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

// stepProcess opens an agent-step process on a scratch database (db, for
// floors on the same database) whose bus does not execute steps: rec keeps
// the StepReady events the queue emits, and the figure hands them to the
// handler. release closes the process, then drops the database.
func (e *env) stepProcess(ctx context.Context) (app *benchApp, rec *stepRecorder, db benchkit.DB, release func(), err error) {
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return nil, nil, db, nil, err
	}
	penv := e.platformEnv(db, prefix)
	cfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		drop()
		return nil, nil, db, nil, err
	}
	rec = &stepRecorder{ready: map[string]events.StepReady{}}
	if app, err = openApp(ctx, cfg, bootstrap.Options{Function: "agent-step", Publisher: rec}); err != nil {
		drop()
		return nil, nil, db, nil, err
	}
	return app, rec, db, func() { app.Close(); drop() }, nil
}
