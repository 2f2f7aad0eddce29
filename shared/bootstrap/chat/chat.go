// Package chat builds the run side of the platform on a bootstrap.Core: the
// tool registry, the run, agent and thread stores, the per-thread request
// queue, and the auth service. It opens no connection of its own.
//
// Imported by: the mains of intake, dispatcher, agent-step and tool-invoke,
// infra/local, tests and benchmarks.
// May import: shared/bootstrap, shared/* (never the knowledge engines or
// shared/docparse: knowledge tools come in as arguments), go-redis (the auth
// cache's invalidation channel) and the standard library.
package chat

import (
	"context"
	"fmt"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/contentguard"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/ratelimit"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/subagent"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
	"github.com/yuxi-serverless/yuxi/shared/webtool"
)

// Kit is the run side's stores and services. Building it is cheap (no
// connection, no goroutine); each main uses the fields its handler takes.
type Kit struct {
	Tools   *tool.Registry
	Runs    *run.Store
	Agents  *agent.Store
	Threads *thread.Store
	Queue   *queue.Service
	// Subagents runs the sub-agent tools (registered in Tools) and the
	// dispatcher's run.finished hook.
	Subagents *subagent.Service
	// Summaries stores context compression summaries (agent-step).
	Summaries *compaction.Store
	// Guard is the content guard over the system settings (keywords, and
	// LLM moderation through core.Providers), for model output in agent-step.
	Guard *contentguard.Guard
	// Budgets are the per-user and per-agent token budgets (agent-step
	// checks them before each model call; intake administers them).
	Budgets *budget.Service
}

// Open builds the kit on core. The tool registry holds the builtin tools plus
// more: the knowledge tools (knowledge.Engines.Tools) where they run, or their
// specs (Offered) where they are only offered to the model.
func Open(core *bootstrap.Core, more ...tool.Tool) *Kit {
	k := &Kit{}
	c := core.Config
	web := webtool.Tools(webtool.Config{Provider: c.WebSearchProvider, TavilyKey: c.TavilyAPIKey, TavilyBaseURL: c.TavilyBaseURL,
		DoubaoKey: c.DoubaoSearchAPIKey, DoubaoBaseURL: c.DoubaoSearchBaseURL, FetchOff: c.WebFetchOff}, c.Outbound().Client())
	k.Runs = run.NewStore(core.Pool, core.Outbox, core.Stream, core.Log)
	k.Agents = agent.NewStore(core.Pool, func(name string) bool { return k.Tools.Has(name) })
	k.Threads = thread.NewStore(core.Pool)
	k.Summaries = compaction.NewStore(core.Pool)
	k.Budgets = budget.New(core.Pool, 0).WithLimits(budget.Limits{MaxOutput: c.TokenBudgetMaxOutput, Ceiling: c.TokenBudgetCallCeiling})
	k.Subagents = subagent.New(subagent.Deps{Pool: core.Pool, Runs: k.Runs, Agents: k.Agents, Threads: k.Threads, Cancel: core.Stream, Log: core.Log})
	base := append([]tool.Tool{tool.AskUserQuestion{}, tool.MarkForImprovement{Pool: core.Pool}}, web...)
	base = append(base, k.Subagents.Tools()...)
	k.Tools = tool.NewRegistry(append(base, more...)...)
	k.Guard = contentguard.New(sysconfig.New(core.Pool, core.Redis, c.RedisPrefix)).WithModeration(contentguard.LLMModerator{Models: core.Providers})
	k.Queue = queue.NewService(core.Pool, core.Outbox, k.Runs, k.Agents, modelCatalog{core.Providers}, core.Stream)
	return k
}

// Offered returns tools known only by their specs, for a process that offers
// tools to the model but never runs them (agent-step; tool-invoke runs them):
// it then needs no engine behind the tools. Invoking one is a wiring bug.
func Offered(specs ...tool.Spec) []tool.Tool {
	out := make([]tool.Tool, len(specs))
	for i, s := range specs {
		out[i] = offered(s)
	}
	return out
}

type offered tool.Spec

func (o offered) Spec() tool.Spec { return tool.Spec(o) }

func (o offered) Invoke(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{}, fmt.Errorf("tool %s is only offered to the model by this process, not run", o.Name)
}

// Auth builds the auth service, with configured secrets or ones generated
// and stored on first start.
func Auth(ctx context.Context, core *bootstrap.Core) (*auth.Service, error) {
	jwtSecret, keySecret := []byte(core.Config.JWTSecret), []byte(core.Config.APIKeySecret)
	if len(jwtSecret) == 0 {
		var err error
		if jwtSecret, keySecret, err = auth.LoadOrCreateSecrets(ctx, core.Pool); err != nil {
			return nil, err
		}
	}
	// Login attempts per client address, counted in Redis across processes.
	limit := ratelimit.New(core.Redis, core.Config.RedisPrefix+"login-rate:", core.Config.LoginAttemptsPerMinute, time.Minute)
	channel := core.Config.RedisPrefix + "auth-invalidate"
	svc, err := auth.NewService(core.Pool, auth.Config{JWTSecret: jwtSecret, APIKeySecret: keySecret, LoginLimiter: limit,
		CacheTTL: core.Config.AuthCacheTTL, Invalidations: redisInvalidations{core.Redis, channel}})
	if err != nil || core.Config.AuthCacheTTL == 0 {
		return svc, err
	}
	// Every process evicts what any process invalidates (auth/cache.go).
	ps := core.Redis.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("subscribe to auth invalidations: %w", err)
	}
	core.OnClose(func() { ps.Close() })
	go func() {
		for m := range ps.Channel() {
			svc.Evict(m.Payload)
		}
	}()
	return svc, nil
}

// modelCatalog adapts the model providers to the queue's Models.
type modelCatalog struct{ *modelprovider.Store }

func (m modelCatalog) Available(spec string) error {
	_, _, err := m.ChatModel(spec)
	return err
}

// redisInvalidations publishes auth cache evictions on a Redis channel.
type redisInvalidations struct {
	rdb     *redis.Client
	channel string
}

func (r redisInvalidations) Publish(ctx context.Context, message string) error {
	return r.rdb.Publish(ctx, r.channel, message).Err()
}

// Invoker returns the invocation use cases over the kit (agent-call,
// evaluation samples): blocking calls wait on hub's streams, at most
// YUXI_SYNC_WAIT. The evaluate function runs agent evaluation suites with it.
func (k *Kit) Invoker(core *bootstrap.Core, hub *runstream.Hub) *invoke.Service {
	return invoke.New(invoke.Deps{Queue: k.Queue, Runs: k.Runs, Threads: k.Threads, Agents: k.Agents, Hub: hub, SyncWait: core.Config.SyncWait})
}
