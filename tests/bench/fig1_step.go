package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap/chat"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 1: the cost of one agent step around an instant model, against the
// cost of one durable commit.
const (
	stepWarm    = 30  // steps (and floor commits) before timing
	stepTimed   = 300 // timed steps, each followed by one timed floor commit
	stepCounted = 100 // steps whose transactions are counted
	stepTarget  = 2.0 // p50 ≤ 2× floor p50 (issue 7; was 3×)
	commitsMax  = 2.0 // write commits per step
)

func figStep(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[1] agent-step overhead, instant model",
		"agentstep.Handle of step 1 (claim, transcript, model turn, commit, stream end) with an in-process model that answers "+
			"\"ok\" without tool calls; floor: BEGIN; INSERT INTO bench_floor; COMMIT (pgx, same pool settings, same database), "+
			"timed alternately with the steps")
	// The process's bus does not execute steps: the figure hands the
	// recorded StepReady events to the handler.
	app, rec, db, release, err := e.stepProcess(ctx)
	if err != nil {
		return err
	}
	defer release()
	cfg := app.Config

	steps, err := createRuns(ctx, app, rec, stepWarm+stepTimed+stepCounted+10)
	if err != nil {
		return err
	}
	floor, err := benchkit.OpenCommitFloor(ctx, db.URL)
	if err != nil {
		return err
	}
	defer floor.Close()

	// Timing, with the production wiring of functions/agent-step (the
	// handler over bootstrap's stores, its relay acknowledging in batches).
	e.Progress("figure 1: timing %d steps against %d commits", stepTimed, stepTimed)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = app.Relay.Run(relayCtx) }()
	h := agentstep.New(app.Runs, instantModels{}, app.Tools, app.Stream,
		agentstep.Config{WorkerID: "bench-agent-step", Lease: cfg.StepLease}, app.Log)
	var stepLat, floorLat benchkit.Samples
	for i, s := range steps[:stepWarm+stepTimed] {
		t0 := time.Now()
		if err := h.Handle(ctx, s); err != nil {
			stopRelay()
			return fmt.Errorf("step of run %s: %w", s.RunID, err)
		}
		d := time.Since(t0)
		fd, err := floor.Once(ctx)
		if err != nil {
			stopRelay()
			return fmt.Errorf("floor commit: %w", err)
		}
		if i >= stepWarm {
			stepLat, floorLat = append(stepLat, d), append(floorLat, fd)
		}
	}
	stopRelay()
	<-relayDone

	counted, err := countStepCommits(ctx, e, db, app, floor, cfg, steps[stepWarm+stepTimed:])
	if err != nil {
		return err
	}
	var done int
	if err := floor.Pool.QueryRow(ctx, `SELECT count(*) FROM agent_runs WHERE status = 'completed'`).Scan(&done); err != nil {
		return err
	}
	if done != len(steps) {
		return fmt.Errorf("%d of %d runs completed: a step did not finish its run", done, len(steps))
	}

	p50, p99 := stepLat.P50(), stepLat.P99()
	f50, f99 := floorLat.P50(), floorLat.P99()
	r50 := benchkit.DurRatio(p50, f50)
	r.Line("step_p50", benchkit.Ms(p50), benchkit.X(r50)+" vs floor "+benchkit.Ms(f50), fmt.Sprintf("≤ %.0f×", stepTarget), r50 <= stepTarget)
	r.Line("step_p99", benchkit.Ms(p99), benchkit.X(benchkit.DurRatio(p99, f99))+" vs floor "+benchkit.Ms(f99), "", false)
	r.Detail("%d timed steps and %d floor commits, alternating; %d steps completed %d runs", stepTimed, stepTimed, len(steps), done)
	counted.print(r)
	return nil
}

// createRuns creates n threads and submits one message on each through the
// queue (as POST /api/agent/runs does) and returns the n StepReady events
// that dispatch emitted, in submission order.
func createRuns(ctx context.Context, app *benchApp, rec *stepRecorder, n int) ([]events.StepReady, error) {
	authSvc, err := chat.Auth(ctx, app.Core)
	if err != nil {
		return nil, err
	}
	if _, err := authSvc.Initialize(ctx, "bench", "bench-password", ""); err != nil {
		return nil, err
	}
	sub := access.Subject{UID: "bench", Role: "superadmin"}
	ids := make([]string, 0, n)
	for range n {
		th, err := app.Threads.Create(ctx, sub.UID, thread.CreateInput{AgentID: "default-chatbot"})
		if err != nil {
			return nil, err
		}
		in, err := app.Queue.Submit(ctx, queue.Submission{Subject: sub, Query: "hello", AgentSlug: "default-chatbot", ThreadID: th.ID})
		if err != nil {
			return nil, err
		}
		if in.RunID == nil {
			return nil, fmt.Errorf("submission on thread %s was %s, not dispatched", th.ID, in.Status)
		}
		ids = append(ids, *in.RunID)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, missing := rec.take(ids)
		if missing == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d step.ready events were not published", missing, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stepCounts is what countStepCommits found over n steps.
type stepCounts struct {
	n                int
	client           commitCounts
	redis            redisCounts
	xacts            int64 // pg_stat_database transactions, the bench's flushes subtracted
	walSync, walIdle int64 // pg_stat_wal.wal_sync during the steps, and during as long a pause
	window, inSteps  time.Duration
}

// countStepCommits runs steps with a handler whose pool carries a commit
// counter (the stores are built like chat.Open builds them), and reads
// the server's counters around them. Every other pool on the database is idle
// and flushed first, so the server delta is the steps' own.
func countStepCommits(ctx context.Context, e *env, db benchkit.DB, app *benchApp, floor *benchkit.CommitFloor, cfg bootstrap.Config, steps []events.StepReady) (stepCounts, error) {
	e.Progress("figure 1: counting transactions of %d steps", stepCounted)
	counter := newCommitCounter()
	pool, err := openTracedPool(ctx, db.URL, counter)
	if err != nil {
		return stepCounts{}, err
	}
	defer pool.Close()
	// The broker accepts run.finished at once; the relay then acknowledges
	// the row in a batch, asynchronously, as in production.
	relay := outbox.NewRelay(pool, outbox.PublisherFunc(func(context.Context, cloudevents.Event) error { return nil }),
		outbox.RelayConfig{Claim: cfg.OutboxClaim}, app.Log)
	ob := &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("agent-step"), Claim: cfg.OutboxClaim}, Relay: relay}
	ropt := *app.Redis.Options()
	rdb := redis.NewClient(&ropt)
	defer rdb.Close()
	rh := &redisCounter{}
	rdb.AddHook(rh)
	stream := runstream.NewWriter(rdb, runstream.Config{Prefix: cfg.RedisPrefix})
	h := agentstep.New(runs.NewStore(pool, ob, stream, app.Log), instantModels{}, app.Tools, stream,
		agentstep.Config{WorkerID: "bench-agent-step-counted", Lease: cfg.StepLease}, app.Log)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = relay.Run(relayCtx) }()
	defer func() { stopRelay(); <-relayDone }()

	warm, measured := steps[:len(steps)-stepCounted], steps[len(steps)-stepCounted:]
	for _, s := range warm { // open the connections, fill the statement caches
		if err := h.Handle(ctx, s); err != nil {
			return stepCounts{}, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the warm-up's acknowledgements land
	pools := []*pgxpool.Pool{app.Pool, floor.Pool, pool}
	if _, err := flushStats(ctx, pools...); err != nil {
		return stepCounts{}, err
	}
	before, err := e.dbXacts(ctx, db.Name)
	if err != nil {
		return stepCounts{}, err
	}
	walBefore, err := e.walSyncs(ctx)
	if err != nil {
		return stepCounts{}, err
	}
	t0 := time.Now()
	counter.set(true)
	rh.set(true)
	var inSteps time.Duration
	for _, s := range measured {
		ts := time.Now()
		if err := h.Handle(withStep(ctx), s); err != nil {
			return stepCounts{}, err
		}
		inSteps += time.Since(ts)
	}
	rh.set(false)
	time.Sleep(100 * time.Millisecond) // the last acknowledgement batch (every 20ms)
	counter.set(false)
	window := time.Since(t0)
	n, err := flushStats(ctx, pools...)
	if err != nil {
		return stepCounts{}, err
	}
	after, err := e.dbXacts(ctx, db.Name)
	if err != nil {
		return stepCounts{}, err
	}
	walAfter, err := e.walSyncs(ctx)
	if err != nil {
		return stepCounts{}, err
	}
	// The same length of time with nothing running here: how many WAL
	// flushes the rest of the server causes meanwhile.
	time.Sleep(window)
	walIdle, err := e.walSyncs(ctx)
	if err != nil {
		return stepCounts{}, err
	}
	return stepCounts{n: len(measured), client: counter.snapshot(), redis: rh.snapshot(), inSteps: inSteps,
		xacts: after.total() - before.total() - int64(n), walSync: walAfter - walBefore, walIdle: walIdle - walAfter, window: window}, nil
}

func (c stepCounts) print(r *benchkit.Report) {
	per := func(v int64) float64 { return float64(v) / float64(c.n) }
	cl := c.client
	writes := per(int64(cl.writes()))
	r.Line("commits_per_step", fmt.Sprintf("%.2f", writes), benchkit.X(writes)+" vs floor 1 commit per INSERT+COMMIT",
		fmt.Sprintf("≤ %.0f", commitsMax), writes <= commitsMax)
	r.Detail("write commits issued by the step: %.2f durable (the step commit: message, step record, run, outbox) + %.2f with synchronous_commit=off (the claim)",
		per(int64(cl.durable)), per(int64(cl.async)))
	r.Detail("not counted above: %.2f outbox acknowledgement batches (async, shared by every event acknowledged within 20ms), %.2f read-only statements, %.2f rollbacks, %.2f prepares, %.2f pool pings",
		per(int64(cl.ack)), per(int64(cl.readOnly)), per(int64(cl.rollback)), per(int64(cl.prepares)), per(int64(cl.pings)))
	r.Detail("server, bench database: pg_stat_database xact_commit+xact_rollback %.2f/step (every transaction, read-only ones too; client-side total %.2f/step)",
		per(c.xacts), per(int64(cl.serverVisible())))
	r.Detail("server, whole cluster: pg_stat_wal.wal_sync %.2f/step (durable commits wait for one; async ones are flushed by the WAL writer; other databases add %.2f/step-equivalent when idle)",
		per(c.walSync), per(c.walIdle))
	rd := c.redis
	step := c.inSteps / time.Duration(c.n)
	pgT, rT := cl.waited/time.Duration(c.n), (rd.tripTime+rd.dialTime)/time.Duration(c.n)
	r.Detail("where a counted step's %s goes (client side): %.1f Postgres round trips (the floor makes 3) %s, %.1f Redis round trips + %.2f new Redis connections %s, everything else %s",
		benchkit.Ms(step), per(int64(cl.statements)), benchkit.Ms(pgT), per(int64(rd.trips)), per(int64(rd.dials)), benchkit.Ms(rT), benchkit.Ms(step-pgT-rT))
}

// stepRecorder is the bench's event bus: it keeps StepReady events by run
// and acknowledges everything.
type stepRecorder struct {
	mu    sync.Mutex
	ready map[string]events.StepReady
}

func (s *stepRecorder) Publish(_ context.Context, ev cloudevents.Event) error {
	if ev.Type() != events.TypeStepReady {
		return nil
	}
	var p events.StepReady
	if err := json.Unmarshal(ev.Data(), &p); err != nil {
		return err
	}
	s.mu.Lock()
	s.ready[p.RunID] = p
	s.mu.Unlock()
	return nil
}

// take returns the events of runIDs in order and how many are missing.
func (s *stepRecorder) take(runIDs []string) ([]events.StepReady, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]events.StepReady, 0, len(runIDs))
	for _, id := range runIDs {
		if p, ok := s.ready[id]; ok {
			out = append(out, p)
		}
	}
	return out, len(runIDs) - len(out)
}

// instantModels is the model registry of figure 1: every spec resolves to
// instantModel.
type instantModels struct{}

func (instantModels) ChatModel(string) (llm.ChatModel, string, error) {
	return instantModel{}, "instant", nil
}

// instantModel answers "ok" at once: one delta, no tool calls.
type instantModel struct{}

func (instantModel) Stream(_ context.Context, _ llm.Request, onDelta func(llm.Delta) error) (llm.Response, error) {
	const answer = "ok"
	if err := onDelta(llm.Delta{Content: answer}); err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Content: answer, FinishReason: "stop",
		Usage: llm.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2, Reported: true}}, nil
}
