package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/functions/dispatcher/dispatcher"
	"github.com/yuxi-serverless/yuxi/functions/tool-invoke/toolinvoke"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// platform is the product wired as the local runner (infra/local) wires it
// — agent-step, tool-invoke and the dispatcher behind the in-process bus,
// the outbox relay running — with three differences: the model registry is
// an in-process model, the tool registry holds one no-op tool, and the bus
// reports two moments to the figure: when a step's handler is entered (the
// start of a step) and when a run.finished event is published (the run's
// end is committed).
type platform struct {
	app     *app
	marks   *marks
	bus     *markingBus
	notices *noticeHook
	sub     access.Subject
	stop    func()
}

// app is what the platform opened: the core clients and the chat stores,
// as functions/agent-step, tool-invoke and the dispatcher open them.
type app struct {
	*bootstrap.Core
	*chat.Kit
}

// marks are the moments the platform reported, by run.
type marks struct {
	mu       sync.Mutex
	starts   map[string][]time.Time // run → start of step 1, 2, …
	handed   map[string]time.Time   // run → its step 1's event handed to the bus by the relay
	finished map[string]time.Time   // run → run.finished published
	changed  chan struct{}          // closed and replaced on every mark
}

func newMarks() *marks {
	return &marks{starts: map[string][]time.Time{}, handed: map[string]time.Time{}, finished: map[string]time.Time{}, changed: make(chan struct{})}
}

func (m *marks) step(runID string, stepNo int, at time.Time) {
	m.mu.Lock()
	s := m.starts[runID]
	if len(s) == stepNo-1 { // the first delivery of a step counts
		m.starts[runID] = append(s, at)
	}
	m.wakeLocked()
	m.mu.Unlock()
}

func (m *marks) hand(runID string, at time.Time) {
	m.mu.Lock()
	if _, ok := m.handed[runID]; !ok {
		m.handed[runID] = at
	}
	m.mu.Unlock()
}

// handedAt returns when run's step 1 was handed to the bus.
func (m *marks) handedAt(runID string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.handed[runID]
	return t, ok
}

func (m *marks) finish(runID string, at time.Time) {
	m.mu.Lock()
	if _, ok := m.finished[runID]; !ok {
		m.finished[runID] = at
	}
	m.wakeLocked()
	m.mu.Unlock()
}

func (m *marks) wakeLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// wait blocks until done (called with the lock held) reports true.
func (m *marks) wait(ctx context.Context, timeout time.Duration, done func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		ok, ch := done(), m.changed
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("not done after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (m *marks) snapshot() (map[string][]time.Time, map[string]time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	starts := make(map[string][]time.Time, len(m.starts))
	for k, v := range m.starts {
		starts[k] = append([]time.Time(nil), v...)
	}
	fin := make(map[string]time.Time, len(m.finished))
	for k, v := range m.finished {
		fin[k] = v
	}
	return starts, fin
}

// openPlatform opens the platform on db with models as its model registry.
func (e *env) openPlatform(ctx context.Context, db benchkit.DB, prefix string, models agentstep.Models) (*platform, error) {
	penv := e.PlatformEnv(db, prefix)
	cfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		return nil, err
	}
	bus := &markingBus{marks: newMarks()}
	core, err := bootstrap.OpenCore(ctx, cfg, bootstrap.Options{Function: "bench-peers", Publisher: bus})
	if err != nil {
		return nil, err
	}
	app := &app{Core: core, Kit: chat.Open(core, noopTool{})}
	tools := app.Tools
	step := agentstep.New(app.Runs, models, tools, app.Stream, agentstep.Config{WorkerID: cfg.WorkerID, Lease: cfg.StepLease}, app.Log)
	invoke := toolinvoke.New(app.Runs, tools, app.Stream, toolinvoke.Config{Timeout: cfg.ToolTimeout}, app.Log)
	disp := dispatcher.New(app.Runs, app.Queue, app.Relay, dispatcher.Config{Sweep: runs.SweepConfig{Stale: cfg.SweepStale}}, app.Log)
	stepRouter, toolRouter, dispRouter := app.Router("agent-step"), app.Router("tool-invoke"), app.Router("dispatcher")
	faas.On(stepRouter, func(ctx context.Context, in events.StepReady) error {
		bus.marks.step(in.RunID, in.StepNo, time.Now())
		return step.Handle(ctx, in)
	})
	invoke.Register(toolRouter)
	disp.Register(dispRouter)
	bus.local = outbox.NewLocalBus(stepRouter, toolRouter, dispRouter)

	authSvc, err := chat.Auth(ctx, core)
	if err != nil {
		app.Close()
		return nil, err
	}
	// A second platform on the same database (figure 8's profile) finds the user there.
	if _, err := authSvc.Initialize(ctx, "bench", "bench-password", ""); err != nil && !errors.Is(err, auth.ErrAlreadyInitialized) {
		app.Close()
		return nil, err
	}
	notices := &noticeHook{at: map[string]time.Time{}}
	app.Redis.AddHook(notices)
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = app.Relay.Run(relayCtx) }()
	return &platform{app: app, marks: bus.marks, bus: bus, notices: notices, sub: access.Subject{UID: "bench", Role: "superadmin"},
		stop: func() { stopRelay(); <-relayDone; app.Close() }}, nil
}

func (p *platform) close() { p.stop() }

// threads opens n threads with the built-in agent.
func (p *platform) threads(ctx context.Context, n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		th, err := p.app.Threads.Create(ctx, p.sub.UID, thread.CreateInput{AgentID: "default-chatbot"})
		if err != nil {
			return nil, err
		}
		out = append(out, th.ID)
	}
	return out, nil
}

// markingBus is the in-process bus (outbox.LocalBus) plus two marks: a
// run.finished event published, a run's first step.ready handed over by the
// relay (after the relay's in-flight slot was taken).
type markingBus struct {
	local *outbox.LocalBus
	marks *marks
	// inFlight counts publications under way (with the in-process bus, a
	// publication lasts as long as its handler); peak is its maximum since
	// the last resetPeak.
	inFlight, peak atomic.Int64
}

func (b *markingBus) resetPeak() { b.peak.Store(b.inFlight.Load()) }

func (b *markingBus) Publish(ctx context.Context, ev cloudevents.Event) error {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	switch ev.Type() {
	case events.TypeRunFinished:
		var p events.RunFinished
		if err := json.Unmarshal(ev.Data(), &p); err == nil {
			b.marks.finish(p.RunID, time.Now())
		}
	case events.TypeStepReady:
		var p events.StepReady
		if err := json.Unmarshal(ev.Data(), &p); err == nil && p.StepNo == 1 {
			b.marks.hand(p.RunID, time.Now())
		}
	}
	if b.local == nil {
		return fmt.Errorf("event bus not ready")
	}
	return b.local.Publish(ctx, ev)
}

// noopTool does nothing and says so; it is a base tool, so every agent may call it.
type noopTool struct{}

func (noopTool) Spec() tool.Spec {
	return tool.Spec{Name: "noop", DisplayName: "No-op", Category: "builtin", Description: "does nothing",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Base: true}
}

func (noopTool) Invoke(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{Output: "ok"}, nil
}

// scriptedModels resolves every model spec to a model that calls the no-op
// tool on the first toolSteps turns of a run and then answers "ok": a run of
// toolSteps+1 steps with nothing but the platform's own work in them.
type scriptedModels struct{ toolSteps int }

func (m scriptedModels) ChatModel(string) (llm.ChatModel, string, error) {
	return scriptedModel(m), "instant", nil
}

type scriptedModel struct{ toolSteps int }

func (m scriptedModel) Stream(_ context.Context, req llm.Request, onDelta func(llm.Delta) error) (llm.Response, error) {
	// Tool results since the run's user message: the steps already taken.
	done := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != "user"; i-- {
		if req.Messages[i].Role == "tool" {
			done++
		}
	}
	usage := llm.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2, Reported: true}
	if done < m.toolSteps {
		return llm.Response{ToolCalls: []llm.ToolCall{{Name: "noop", Arguments: "{}"}}, FinishReason: "tool_calls", Usage: usage}, nil
	}
	const answer = "ok"
	if err := onDelta(llm.Delta{Content: answer}); err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Content: answer, FinishReason: "stop", Usage: usage}, nil
}

// noticeHook is a go-redis hook that notes when a thread's queue notice
// (the XADD queue.Submit sends right after its commit and the hand-off of
// the first step to the relay) starts: the client-side moment closest to a
// submission's commit that the bench can observe without touching the
// product. The time Submit returns comes after that notice's round trip.
type noticeHook struct {
	mu sync.Mutex
	at map[string]time.Time // stream key → start of its latest XADD
}

func (h *noticeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *noticeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *noticeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		now := time.Now()
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "xadd") {
				key := fmt.Sprint(args[1])
				h.mu.Lock()
				h.at[key] = now
				h.mu.Unlock()
			}
		}
		return next(ctx, cmds)
	}
}

// committed returns when thread's latest queue notice started.
func (p *platform) committed(threadID string) (time.Time, bool) {
	key := runstream.Config{Prefix: p.app.Config.RedisPrefix}.QueueKey(threadID)
	p.notices.mu.Lock()
	defer p.notices.mu.Unlock()
	t, ok := p.notices.at[key]
	return t, ok
}
