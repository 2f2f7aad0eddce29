package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/evaluate/evaluate"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/evaluation"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 18: evaluation runs as scheduled jobs (issue 12): a 300-query RAG
// evaluation on the 5k-chunk SciFact KB against 300 sequential queries, and
// the scheduler tick → evaluation start latency against the outbox relay's
// one-event latency, both in the same process and run.
const (
	evalTickTarget = 2.0
	evalTicks      = 40
	evalTickWarm   = 5 // ticks and relays before timing, as figure 1 warms its steps
)

// evalProbe is a publisher in front of the evaluate function's router that
// notes when the relay hands it each batch event ("run:batch" → arrival).
type evalProbe struct {
	bus      *outbox.LocalBus
	mu       sync.Mutex
	arrivals map[string]time.Time
	notify   chan struct{}
}

func (p *evalProbe) Publish(ctx context.Context, ev cloudevents.Event) error {
	at := time.Now()
	if ev.Type() == events.TypeEvaluationBatchReady {
		var b events.EvaluationBatchReady
		if json.Unmarshal(ev.Data(), &b) == nil {
			p.mu.Lock()
			if _, seen := p.arrivals[fmt.Sprintf("%s:%d", b.RunID, b.Batch)]; !seen {
				p.arrivals[fmt.Sprintf("%s:%d", b.RunID, b.Batch)] = at
			}
			close(p.notify)
			p.notify = make(chan struct{})
			p.mu.Unlock()
		}
	}
	return p.bus.Publish(ctx, ev)
}

// evalSwitch is the evaluate handler's Evaluator: batches go to the
// service of the run being measured (the runs at concurrency 1 and 2 have
// services of their own), the rest to the default one.
type evalSwitch struct {
	*evaluation.Service
	cur atomic.Pointer[evaluation.Service]
}

func (s *evalSwitch) EvaluateBatch(ctx context.Context, runID string, batch int) error {
	return s.cur.Load().EvaluateBatch(ctx, runID, batch)
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// evalProfile starts a CPU profile into $YUXI_BENCH_EVAL_CPUPROFILE-name.prof
// when that is set (not with -cpuprofile: one profile at a time); the
// returned func stops it.
func evalProfile(name string) func() {
	prefix := os.Getenv("YUXI_BENCH_EVAL_CPUPROFILE")
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + name + ".prof")
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// since waits for the first delivery of key and returns it less t0.
func (p *evalProbe) since(ctx context.Context, key string, t0 time.Time) (time.Duration, error) {
	timeout := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		at, ok := p.arrivals[key]
		n := p.notify
		p.mu.Unlock()
		if ok {
			return at.Sub(t0), nil
		}
		select {
		case <-n:
		case <-timeout:
			return 0, fmt.Errorf("event %s was not relayed within 30s", key)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func figEval(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[18] evaluation as scheduled jobs: a 300-query RAG run, scheduler tick → evaluation start",
		"the SciFact KB of figure 5 (about 5k chunks, the KB's default retrieval options); a dataset of SciFact's 300 test queries whose "+
			"gold ids are the relevant documents' files; the run through the evaluate function's handler, its first batch event relayed "+
			"by the outbox relay to it in process, which chains the following batches (the defaults: batches of YUXI_EVAL_BATCH_SIZE "+
			"items, YUXI_EVAL_CONCURRENCY at once); floor: "+
			"the same 300 queries one after another through kb.Retriever.Query, 300 × their p50. Ticks: "+fmt.Sprint(evalTicks)+
			" scheduler ticks (after "+fmt.Sprint(evalTickWarm)+" untimed ones) delivered to the evaluate handler, each starting one due run (a one-item dataset), timed to the "+
			"relay's delivery of its first batch event; floor: an outbox transaction of one event, timed to its delivery")
	kn, err := e.knowledge(ctx)
	if err != nil {
		return err
	}
	sci, err := kn.dataKB(ctx, e, "scifact")
	if err != nil {
		return err
	}
	// An evaluate process on the fixture's database: its relay delivers to
	// the evaluate handler through the probe.
	penv := e.platformEnv(kn.db, kn.prefix)
	penv["YUXI_BLOB_URI"] = kn.blobDir
	for k, v := range e.kbEnv {
		penv[k] = v
	}
	cfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		return err
	}
	// The product's default concurrency (YUXI_EVAL_CONCURRENCY's default,
	// what the evaluate function runs with) sets the target.
	evalDefaultConcurrency := cfg.EvalConcurrency
	evalWallTarget := 1.3 / float64(evalDefaultConcurrency)
	probe := &evalProbe{arrivals: map[string]time.Time{}, notify: make(chan struct{})}
	app, err := openApp(ctx, cfg, bootstrap.Options{Function: "evaluate", Publisher: probe})
	if err != nil {
		return err
	}
	defer app.Close()
	evals := app.Knowledge.Evaluation()
	router := app.Router("evaluate")
	sw := &evalSwitch{Service: evals}
	sw.cur.Store(evals)
	h := evaluate.New(sw, evaluate.Config{}, app.Log)
	h.Register(router)
	probe.bus = outbox.NewLocalBus(router)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = app.Relay.Run(relayCtx) }()
	defer func() { stopRelay(); <-relayDone }()

	fileOf := map[string]string{}
	for file, doc := range sci.docOf {
		fileOf[doc] = file
	}
	var b bytes.Buffer
	queries := make([]string, 0, len(sci.ds.Queries))
	for _, q := range sci.ds.Queries {
		var gold []string
		for id, rel := range sci.ds.Qrels[q.ID] {
			if rel > 0 && fileOf[id] != "" {
				gold = append(gold, fileOf[id])
			}
		}
		line, _ := json.Marshal(map[string]any{"query": q.Text, "gold_chunk_ids": gold})
		b.Write(append(line, '\n'))
		queries = append(queries, q.Text)
	}
	upload := func(name string, content []byte) (string, error) {
		d, err := evals.Upload(ctx, kn.sub, sci.kb.KBID, func() (evaluation.UploadInput, error) {
			return evaluation.UploadInput{Filename: name + ".jsonl", Name: name, Content: content}, nil
		})
		return d.DatasetID, err
	}
	full, err := upload("scifact-test", b.Bytes())
	if err != nil {
		return err
	}

	// Floor: the queries one after another (caches warm: a first pass).
	opt := sci.kb.Retrieval()
	for _, q := range queries[:20] {
		if _, err := app.Knowledge.Retriever.Query(ctx, sci.kb, q, opt, ""); err != nil {
			return err
		}
	}
	e.Progress("figure 18: %d sequential queries", len(queries))
	var one benchkit.Samples
	stop := evalProfile("queries")
	cpu0 := cpuTime()
	for _, q := range queries {
		t0 := time.Now()
		if _, err := app.Knowledge.Retriever.Query(ctx, sci.kb, q, opt, ""); err != nil {
			return err
		}
		one = append(one, time.Since(t0))
	}
	queryCPU := cpuTime() - cpu0
	stop()
	p50 := one.P50()
	floor := time.Duration(len(queries)) * p50
	var sum time.Duration
	for _, d := range one {
		sum += d
	}

	// run times one evaluation of the full dataset by svc.
	run := func(svc *evaluation.Service) (wall, cpu time.Duration, runID, status string, err error) {
		sw.cur.Store(svc)
		defer sw.cur.Store(evals)
		cpu0, t0 := cpuTime(), time.Now()
		if runID, err = svc.StartRun(ctx, kn.sub, sci.kb.KBID, evaluation.RunInput{DatasetID: full}); err != nil {
			return
		}
		if status, err = waitRunStatus(ctx, app, runID, 10*time.Minute); err != nil {
			return
		}
		return time.Since(t0), cpuTime() - cpu0, runID, status, nil
	}
	e.Progress("figure 18: a %d-query evaluation run", len(queries))
	stop = evalProfile("eval")
	wall, evalCPU, runID, status, err := run(evals)
	stop()
	if err != nil {
		return err
	}
	var ndcg float64
	_ = app.Pool.QueryRow(ctx, `SELECT COALESCE((metrics->>'ndcg@10')::float8, 0) FROM evaluation_runs WHERE run_id = $1`, runID).Scan(&ndcg)
	ratio := benchkit.DurRatio(wall, floor)
	r.Line("eval_300_queries_wall", benchkit.Ms(wall), benchkit.X(ratio)+" vs floor "+benchkit.Ms(floor)+" (300 × one query p50 "+benchkit.Ms(p50)+")",
		fmt.Sprintf("≤ %.3f× (1.3 / concurrency %d)", evalWallTarget, evalDefaultConcurrency), ratio <= evalWallTarget && status == "completed")
	r.Detail("run %s: %s, nDCG@10 %.4f; one query p50 %s, p99 %s over %d; the 300 queries one after another took %s (%s of 300 × p50)",
		runID, status, ndcg, benchkit.Ms(p50), benchkit.Ms(one.P99()), len(one), benchkit.Ms(sum), benchkit.X(benchkit.DurRatio(sum, floor)))
	r.Detail("bench process CPU: %s per query one after another, %s per evaluated item (concurrency %d); Postgres's CPU not counted",
		benchkit.Ms(queryCPU/time.Duration(len(queries))), benchkit.Ms(evalCPU/time.Duration(len(queries))), evalDefaultConcurrency)
	// The default run again, warm: the first run of the process also opens
	// the pool's connections and prepares its statements on them.
	{
		w, c1, id, st, err := run(evals)
		if err != nil {
			return err
		}
		r.Detail("the default run again (warm): run %s %s in %s = %s of 300 × p50; %s CPU per item",
			id, st, benchkit.Ms(w), benchkit.X(benchkit.DurRatio(w, floor)), benchkit.Ms(c1/time.Duration(len(queries))))
	}
	// The same run at concurrency 1 and 2 (services of their own, the
	// default batch size): on 2 cores CPU-bound items scale at most 2×.
	for _, c := range []int{1, 2} {
		svc := evaluation.New(evaluation.Deps{Pool: app.Pool, Outbox: app.Outbox, KBs: app.Knowledge.KBs, Retriever: app.Knowledge.Retriever,
			Models: app.Providers, Config: evaluation.Config{BatchSize: cfg.EvalBatchSize, Concurrency: c}, Log: app.Log})
		w, c1, id, st, err := run(svc)
		if err != nil {
			return err
		}
		r.Detail("concurrency %d: run %s %s in %s = %s of 300 × p50 (target at this concurrency ≤ %.3f×); %s CPU per item",
			c, id, st, benchkit.Ms(w), benchkit.X(benchkit.DurRatio(w, floor)), 1.3/float64(c), benchkit.Ms(c1/time.Duration(len(queries))))
	}

	// Ticks: a schedule due every minute on a one-item dataset.
	small, err := upload("one-query", []byte(`{"query":"`+queries[0]+`"}`+"\n"))
	if err != nil {
		return err
	}
	sc, err := evals.CreateSchedule(ctx, kn.sub, evaluation.ScheduleInput{KBID: sci.kb.KBID, Cron: ptr("* * * * *"), DatasetID: &small})
	if err != nil {
		return err
	}
	defer func() { _ = evals.DeleteSchedule(context.WithoutCancel(ctx), kn.sub, sc.ScheduleID) }()
	e.Progress("figure 18: %d ticks and %d one-event relays", evalTicks, evalTicks)
	base := sc.CreatedAt.Truncate(time.Minute).Add(time.Minute)
	var tick, relay, handler benchkit.Samples
	for i := range evalTickWarm + evalTicks {
		// The first ticks and relays of the process pay for statement
		// preparation and cold catalog caches; they are run, not timed.
		timed := i >= evalTickWarm
		// The floor: one event committed through the outbox, to its delivery
		// (a batch of no run: the handler's no-op).
		fake := fmt.Sprintf("run_%08x", i)
		t0 := time.Now()
		if err := app.Outbox.Tx(ctx, app.Pool, func(tx pgx.Tx, emit outbox.Emit) error {
			return emit(outbox.Pending{Payload: events.EvaluationBatchReady{RunID: fake, Batch: 0}, DedupeKey: "bench-relay:" + fake})
		}); err != nil {
			return err
		}
		d, err := probe.since(ctx, fake+":0", t0)
		if err != nil {
			return err
		}
		if timed {
			relay = append(relay, d)
		}

		// A tick: the handler starts the due run; its first batch event is
		// the evaluation's start.
		at := base.Add(time.Duration(i) * time.Minute)
		ev := cloudevents.NewEvent()
		ev.SetID(fmt.Sprintf("bench-tick-%d", i))
		ev.SetSource("/bench/scheduler")
		ev.SetType(events.TypeEvaluationTick)
		_ = ev.SetData(cloudevents.ApplicationJSON, events.EvaluationTick{Time: at.UTC().Format(time.RFC3339)})
		t0 = time.Now()
		if res := router.Deliver(ctx, ev); res.Err != nil {
			return res.Err
		}
		if timed {
			handler = append(handler, time.Since(t0))
		}
		var started string
		if err := app.Pool.QueryRow(ctx, `SELECT COALESCE(run_id, '') FROM evaluation_schedule_fires WHERE schedule_id = $1 AND due_at = $2`,
			sc.ScheduleID, at).Scan(&started); err != nil || started == "" {
			return fmt.Errorf("tick %d started no run: %v", i, err)
		}
		d, err = probe.since(ctx, started+":0", t0)
		if err != nil {
			return err
		}
		if timed {
			tick = append(tick, d)
		}
		if _, err := waitRunStatus(ctx, app, started, time.Minute); err != nil {
			return err
		}
	}
	tr := benchkit.DurRatio(tick.P99(), relay.P99())
	r.Line("eval_tick_to_start_p99", benchkit.Ms(tick.P99()), benchkit.X(tr)+" vs floor "+benchkit.Ms(relay.P99())+" (one-event outbox relay p99)",
		fmt.Sprintf("≤ %.1f×", evalTickTarget), tr <= evalTickTarget)
	r.Detail("tick → start p50 %s, relay p50 %s over %d ticks; the tick handler returned after p50 %s, p99 %s",
		benchkit.Ms(tick.P50()), benchkit.Ms(relay.P50()), len(tick), benchkit.Ms(handler.P50()), benchkit.Ms(handler.P99()))
	return nil
}

func ptr[T any](v T) *T { return &v }

func waitRunStatus(ctx context.Context, app *benchApp, runID string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		var status string
		if err := app.Pool.QueryRow(ctx, `SELECT status FROM evaluation_runs WHERE run_id = $1`, runID).Scan(&status); err != nil {
			return "", err
		}
		if status != "running" {
			return status, nil
		}
		if time.Now().After(deadline) {
			return status, fmt.Errorf("evaluation run %s still running after %s", runID, timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
