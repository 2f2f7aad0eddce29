// Package local is the all-in-one process behind `make run`: it hosts every
// function (intake, dispatcher, agent-step, tool-invoke, doc-parse, kb-index,
// kb-graph, evaluate) in one process, wires
// them with the in-process event bus (the same routing Knative Triggers give),
// runs the outbox relay, the dispatcher's sweep and the evaluation scheduler's
// tick on timers, and serves the
// API on PORT (default 5050). It needs only PostgreSQL and Redis.
//
// Imported by: infra/local/cmd/yuxi-server (main), tests and benchmarks.
// May import: functions/*/<handler package>, shared/*, infra/sandbox-provisioner/*, events, the CloudEvents SDK.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/functions/doc-parse/parsedoc"
	"github.com/yuxi-serverless/yuxi/functions/evaluate/evaluate"
	"github.com/yuxi-serverless/yuxi/functions/intake/intake"
	"github.com/yuxi-serverless/yuxi/functions/kb-graph/graphbuild"
	"github.com/yuxi-serverless/yuxi/functions/kb-index/indexdoc"
	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/identity"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/knowledge"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/mcplayer"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/parser"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/kbtool"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/skill"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/usersettings"
)

// Platform is the running all-in-one process.
type Platform struct {
	App     *App
	Handler http.Handler
	// Routers are the event functions' routers (dispatcher, agent-step, tool-invoke).
	Routers []*faas.Router
	hub     *runstream.Hub
	sweep   *dispatcher.Handler
	eval    *evaluate.Handler
}

// App is what the platform opened: the core (its fields promoted: App.Pool,
// App.Log, …), the knowledge engines and the run side's stores.
type App struct {
	*bootstrap.Core
	Knowledge *knowledge.Engines
	Chat      *chat.Kit
}

// Models can replace the model registry (benchmarks use an in-process model).
type Models interface {
	agentstep.Models
}

// Option customises a Platform.
type Option func(*options)

type options struct {
	models     Models
	sandbox    *sandbox.Client
	sandboxCfg sandboxtool.Config
	webDir     string
}

// WithWeb serves the built web UI in dir (web/dist) at / next to the API
// (WebHandler).
func WithWeb(dir string) Option { return func(o *options) { o.webDir = dir } }

// WithModels replaces the model registry for agent steps.
func WithModels(m Models) Option { return func(o *options) { o.models = m } }

// WithSandbox registers the agent's file-system and sandbox tools on the
// sandbox provisioner c reaches (StartSandbox); each user's agent env is
// injected into their sandboxes.
func WithSandbox(c *sandbox.Client, cfg sandboxtool.Config) Option {
	return func(o *options) { o.sandbox, o.sandboxCfg = c, cfg }
}

// New opens the platform.
func New(ctx context.Context, cfg bootstrap.Config, opts ...Option) (*Platform, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	bus := &lazyBus{}
	// Each function of a cluster has its own pods; here one process runs them
	// all, so parsing and indexing get lanes of their own, sized to leave
	// cores to the API and chat (YUXI_INGEST_CONCURRENCY).
	n := cfg.IngestConcurrency
	lanes := map[string]int{events.TypeDocumentUploaded: n, events.TypeDocumentParsed: n, events.TypeDocumentIndexed: n,
		events.TypeBucketObjectChanged: n, events.TypeGCSObjectFinalized: n, events.TypeGCSObjectDeleted: n,
		events.TypeEvaluationBatchReady: n, events.TypeDatasetBatchReady: n}
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "local", Publisher: bus, Lanes: lanes})
	if err != nil {
		return nil, err
	}
	docParser, err := parser.Open(cfg)
	if err != nil {
		core.Close()
		return nil, err
	}
	var more []tool.Tool
	var skillFiles *skill.Materializer // set below, before anything runs
	var installSkills *skill.Service   // set below, before anything runs
	var installRuns skill.Runs         // set below, before anything runs
	if o.sandbox != nil {
		sc := o.sandboxCfg
		sc.Env = usersettings.New(core.Pool, nil).EnvForUID // reads agent_envs only
		sc.Prepare = func(ctx context.Context, c tool.Call) error { return skillFiles.Prepare(ctx, c) }
		sc.Artifacts = thread.NewStore(core.Pool)
		if sc.Parse == nil {
			sc.Parse, sc.OCREngine = parser.Markdown(docParser), cfg.OCREngine
		}
		more = sandboxtool.New(o.sandbox, sc)
		// install_skill: the skills service and the runs are bound below,
		// before anything runs.
		more = append(more, skill.InstallTool{Bind: func() (*skill.Service, skill.Runs) { return installSkills, installRuns }})
	}
	var outputs kbtool.Outputs
	if o.sandbox != nil {
		outputs = sandboxtool.SaveOutput(o.sandbox)
	}
	app, err := openApp(core, outputs, more...)
	if err != nil {
		core.Close()
		return nil, err
	}
	id, err := identity.Open(ctx, core, app.Knowledge.Blob)
	if err != nil {
		core.Close()
		return nil, err
	}
	crash := cfg.Crasher()
	var models Models = core.Providers
	if o.models != nil {
		models = o.models
	}
	kit, k := app.Chat, app.Knowledge
	mcps := mcplayer.Open(core)
	skills := mcplayer.Skills(ctx, core, k.Blob, kit.Tools, mcps, o.sandbox, true)
	if o.sandbox != nil {
		skillFiles = skills.Materializer(o.sandbox)
		installSkills, installRuns = skills, kit.Runs
	}
	stepCfg := agentstep.Config{WorkerID: cfg.WorkerID, Lease: cfg.StepLease, Crash: crash, RunTools: mcps, Summaries: kit.Summaries, Skills: skills.Gate(), Guard: kit.Guard, Budgets: kit.Budgets, Steers: kit.Queue}
	if o.sandbox != nil {
		stepCfg.Workspace = o.sandbox // the user's agents/AGENTS.md, USER.md, MEMORY.md
	}
	step := agentstep.New(kit.Runs, models, kit.Tools, core.Stream, stepCfg, core.Log)
	large := sandboxtool.LargeResults{Blob: func(ctx context.Context, key string, data []byte) error {
		_, err := k.Blob.Put(ctx, key, bytes.NewReader(data), int64(len(data)), "text/plain; charset=utf-8")
		return err
	}}
	if o.sandbox != nil {
		large.Files = o.sandbox
	}
	tools := toolinvoke.New(kit.Runs, kit.Tools, core.Stream, toolinvoke.Config{Timeout: cfg.ToolTimeout, Crash: crash, RunTools: mcps, Skills: skills.Gate(),
		Offload: large, LargeResultTokens: cfg.LargeToolResultTokens}, core.Log)
	disp := dispatcher.New(kit.Runs, kit.Queue, core.Relay, dispatcher.Config{
		Sweep: run.SweepConfig{Stale: cfg.SweepStale}, Crash: crash, Files: k.FileSweeper(), Subagents: kit.Subagents, Budgets: kit.Budgets}, core.Log)
	parse := parsedoc.New(k.KBs, core.Outbox, k.Blob, k.Buckets, docParser, k.Keyword, k.Vectors, core.Stream,
		parsedoc.Config{Lease: cfg.FileLease, Crash: crash}, core.Log)
	index := indexdoc.New(k.KBs, core.Outbox, k.Blob, k.Keyword, k.Vectors, k.Models, core.Stream,
		indexdoc.Config{Lease: cfg.FileLease, Crash: crash}, core.Log)

	stepRouter, toolRouter, dispRouter := app.Router("agent-step"), app.Router("tool-invoke"), app.Router("dispatcher")
	hub := core.NewHub()
	// Agent evaluation suites run samples through the normal run path, waiting on the API's hub.
	evals := k.Evaluation().WithAgents(kit.Invoker(core, hub))
	eval := evaluate.New(evals, evaluate.Config{Crash: crash}, core.Log)

	builder := k.GraphBuilder(nil, crash)
	graphRouter := app.Router("kb-graph")
	graphbuild.New(builder, core.Log).Register(graphRouter)

	parseRouter, indexRouter, evalRouter := app.Router("doc-parse"), app.Router("kb-index"), app.Router("evaluate")
	step.Register(stepRouter)
	tools.Register(toolRouter)
	disp.Register(dispRouter)
	parse.Register(parseRouter)
	index.Register(indexRouter)
	eval.Register(evalRouter)
	bus.set(outbox.NewLocalBus(stepRouter, toolRouter, dispRouter, parseRouter, indexRouter, evalRouter, graphRouter))

	api := intake.New(intake.Deps{Auth: id.Auth, Agents: kit.Agents, Threads: kit.Threads, Queue: kit.Queue,
		Runs: kit.Runs, Tools: kit.Tools, MCP: mcps, Hub: hub, Stream: core.Stream, Log: core.Log, MaxBodyBytes: cfg.MaxBodyBytes,
		SSEHeartbeat: cfg.SSEHeartbeat, SSEMaxDuration: cfg.SSEMaxDuration, SyncWait: cfg.SyncWait, KBs: k.KBs, Retriever: k.Retriever, Blob: k.Blob, Keyword: k.Keyword, Vectors: k.Vectors,
		Outbox: core.Outbox, Parser: docParser, NotifyToken: cfg.NotifyToken,
		Settings: id.Settings, OIDC: id.OIDC, SysConfig: id.SysConfig, Guard: id.Guard, Ready: id.Ready, OCREngine: cfg.OCREngine, OCRBaseURL: cfg.OCRBaseURL, Logs: core.Logs, ClientAddr: cfg.TrustedProxies, Evaluation: evals, Buckets: k.Buckets, Providers: core.Providers,
		Graph: k.Graph, GraphBuild: builder, Mindmaps: k.Mindmaps(), Assist: k.Assist(), Outbound: cfg.Outbound().Client(), Sandbox: o.sandbox, Skills: skills, Models: core.Providers, ChatImages: id.ChatImages, Tasks: id.Tasks, Dashboard: id.Dashboard, Budgets: kit.Budgets})
	var handler = api.Handler()
	if o.webDir != "" {
		handler = WebHandler(o.webDir, handler)
	}
	return &Platform{App: app, Handler: handler, Routers: []*faas.Router{dispRouter, stepRouter, toolRouter, parseRouter, indexRouter, evalRouter, graphRouter},
		hub: hub, sweep: disp, eval: eval}, nil
}

// Run serves until ctx ends: the API on addr, the relay, the stream hub and
// the sweep timer (which also runs once at start, so work left by a crashed
// process resumes). ready is called once the listener is bound.
func (p *Platform) Run(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(4)
	go func() { defer wg.Done(); errs <- p.App.Relay.Run(ctx) }()
	go func() { defer wg.Done(); errs <- ignoreCanceled(p.hub.Run(ctx)) }()
	go func() { defer wg.Done(); p.sweepLoop(ctx) }()
	go func() { defer wg.Done(); p.tickLoop(ctx) }()

	srv := &http.Server{Handler: p.Handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	if ready != nil {
		ready(ln.Addr())
	}
	err = srv.Serve(ln)
	cancel()
	wg.Wait()
	p.App.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (p *Platform) sweepLoop(ctx context.Context) {
	t := time.NewTicker(p.App.Config.SweepInterval)
	defer t.Stop()
	for {
		if err := p.sweep.Sweep(ctx, events.SweepRequested{Reason: "schedule"}); err != nil && ctx.Err() == nil {
			p.App.Log.Warn("sweep", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tickLoop is the local scheduler: at the start of every minute it ticks
// the evaluate function (the in-process PingSource), which starts the
// scheduled evaluations due by then, once each.
func (p *Platform) tickLoop(ctx context.Context) {
	for {
		now := time.Now()
		next := now.Truncate(time.Minute).Add(time.Minute)
		select {
		case <-ctx.Done():
			return
		case <-time.After(next.Sub(now)):
		}
		tick := events.EvaluationTick{Time: next.UTC().Format(time.RFC3339), Reason: "schedule"}
		if err := p.eval.Tick(ctx, tick); err != nil && ctx.Err() == nil {
			p.App.Log.Warn("evaluation tick", "error", err)
		}
	}
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// openApp opens the knowledge engines and the run side on core.
func openApp(core *bootstrap.Core, outputs kbtool.Outputs, more ...tool.Tool) (*App, error) {
	k, err := knowledge.Open(core)
	if err != nil {
		return nil, err
	}
	k.Outputs = outputs
	return &App{Core: core, Knowledge: k, Chat: chat.Open(core, append(k.Tools(), more...)...)}, nil
}

// lazyBus lets the relay be built before the routers it delivers to.
type lazyBus struct {
	mu  sync.RWMutex
	bus *outbox.LocalBus
}

func (l *lazyBus) set(b *outbox.LocalBus) { l.mu.Lock(); l.bus = b; l.mu.Unlock() }

func (l *lazyBus) Publish(ctx context.Context, ev cloudevents.Event) error {
	l.mu.RLock()
	b := l.bus
	l.mu.RUnlock()
	if b == nil {
		return fmt.Errorf("event bus not ready")
	}
	return b.Publish(ctx, ev)
}
