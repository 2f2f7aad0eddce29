package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	runs "github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 9: from the commit of a request to the start of its first step,
// ours (the per-thread FIFO request queue, the outbox, the in-process bus)
// against River's insert-to-work latency, idle and under load.
const (
	riverSchema   = "river"
	riverWorkers  = 100 // River's default queue: MaxWorkers
	riverPool     = 20  // River's pool: the size of each of our functions' (YUXI_DB_MAX_CONNS default)
	maxInFlight   = 256 // load generator: submissions (inserts) in flight at most
	dispatchRatio = 1.0 // our p99 ≤ River's p99
	loadRounds    = 3   // load rounds, each ours then River
	// relayMaxInFlight is outbox.RelayConfig's default MaxInFlight, which
	// bootstrap.Open keeps: publications under way at once per process.
	relayMaxInFlight = 64
)

func figRiver(ctx context.Context, e *env, r *benchkit.Report) error {
	sz := e.sizes
	r.Section(fmt.Sprintf("[9] queue dispatch vs River: commit → start of the first step, idle and at %d requests/s over %d threads", sz.rate, sz.threads),
		"ours: queue.Submit (what POST /api/agent/runs calls) on the real stack (outbox relay, in-process bus, agent-step with an instant model "+
			"that answers at once, dispatcher), from the commit (seen as the start of the queue notice XADD Submit sends right after it) "+
			"to the agent-step handler's entry; threads picked at random, "+
			"submissions on one thread in order; River v0.51 (riverpgxv5, default fetch settings, "+fmt.Sprint(riverWorkers)+" workers, its own schema in the "+
			"same database): from Insert's return to the no-op worker's entry; idle: one at a time, "+sz.idleGap.String()+" apart")
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()

	p, err := e.openPlatform(ctx, db, prefix, scriptedModels{toolSteps: 0})
	if err != nil {
		return err
	}
	defer p.close()
	e.Progress("figure 9: opening %d threads", sz.threads)
	threads, err := p.threads(ctx, sz.threads)
	if err != nil {
		return err
	}
	rv, err := startRiver(ctx, e, db)
	if err != nil {
		return err
	}
	defer rv.stop()
	ours := newOurQueue(p, threads)

	// Warm both: connections, statement caches.
	for i := range 20 {
		if _, err := ours.isolated(ctx, "w", i); err != nil {
			return err
		}
		if _, err := rv.isolated(ctx); err != nil {
			return err
		}
	}

	e.Progress("figure 9: %d isolated requests and River jobs, alternating", sz.idle)
	var ourIdle, riverIdle, ourHandoff benchkit.Samples
	for i := range sz.idle {
		d, err := ours.isolated(ctx, "i", i)
		if err != nil {
			return err
		}
		ourIdle = append(ourIdle, d)
		time.Sleep(sz.idleGap)
		if d, err = rv.isolated(ctx); err != nil {
			return err
		}
		riverIdle = append(riverIdle, d)
		time.Sleep(sz.idleGap)
		if d, queued, err := ours.handoff(ctx, i); err != nil {
			return err
		} else if queued {
			ourHandoff = append(ourHandoff, d)
		}
		time.Sleep(sz.idleGap)
	}

	// Load alternates ours and River in rounds, so that a burst of other
	// work on a shared machine hits both.
	total := sz.rate * sz.seconds
	per := max(1, total/loadRounds)
	var ol ourLoad
	var rl riverLoad
	for round := range loadRounds {
		e.Progress("figure 9: round %d of %d: %d requests, then %d River jobs, at %d/s over %d threads", round+1, loadRounds, per, per, sz.rate, sz.threads)
		o, err := ours.load(ctx, round, per, sz.rate)
		if err != nil {
			return err
		}
		ol.add(o)
		time.Sleep(500 * time.Millisecond)
		rr, err := rv.load(ctx, per, sz.rate)
		if err != nil {
			return err
		}
		rl.add(rr)
		time.Sleep(500 * time.Millisecond)
	}

	line := func(name string, o, rs benchkit.Samples) {
		o99, r99 := o.P99(), rs.P99()
		rr := benchkit.DurRatio(o99, r99)
		r.Line(name, benchkit.Ms(o99), fmt.Sprintf("%s River p99 %s; p50 %s vs River %s", benchkit.X(rr), benchkit.Ms(r99), benchkit.Ms(o.P50()), benchkit.Ms(rs.P50())),
			fmt.Sprintf("≤ %.0f× River", dispatchRatio), rr <= dispatchRatio)
	}
	line("dispatch_idle_p99", ourIdle, riverIdle)
	r.Detail("idle, ours, a request queued behind its thread's run: that run's finished_at → its first step p50 %s p99 %s "+
		"(%d of %d pairs queued; the dispatcher's hand-off)", benchkit.Ms(ourHandoff.P50()), benchkit.Ms(ourHandoff.P99()), len(ourHandoff), sz.idle)
	line("dispatch_load_p99", ol.atOnce, rl.lat)
	r.Line("fifo_violations", fmt.Sprint(ol.violations), fmt.Sprintf("%d out of order, %d overlapping the previous run; %d threads with one; %d requests never started",
		ol.outOfOrder, ol.overlaps, ol.violatingThreads, ol.lost),
		"0", ol.violations == 0 && ol.lost == 0)
	r.Detail("under load, ours: %d requests issued at %.0f/s (asked %d/s); %d found their thread idle (the line above), %d queued behind a run "+
		"of their thread: commit → first step p50 %s p99 %s, previous run's finished_at → first step p50 %s p99 %s",
		ol.n, ol.rate, sz.rate, len(ol.atOnce), len(ol.queued), benchkit.Ms(ol.queued.P50()), benchkit.Ms(ol.queued.P99()), benchkit.Ms(ol.handoff.P50()), benchkit.Ms(ol.handoff.P99()))
	r.Detail("under load, ours, the line above split: commit → the relay hands step.ready to the bus (its in-flight slot taken) p50 %s p99 %s; "+
		"→ agent-step handler entered (bus routing, schema check, decode) p50 %s p99 %s",
		benchkit.Ms(ol.toRelay.P50()), benchkit.Ms(ol.toRelay.P99()), benchkit.Ms(ol.toHandler.P50()), benchkit.Ms(ol.toHandler.P99()))
	r.Detail("under load, ours: at most %d publications under way on the in-process bus at once (the relay allows %d; each holds its slot for its handler's whole run)",
		ol.peakInFlight, relayMaxInFlight)
	r.Detail("under load, ours, every request: p50 %s p99 %s; Submit itself p50 %s p99 %s (River Insert p50 %s p99 %s)",
		benchkit.Ms(ol.all.P50()), benchkit.Ms(ol.all.P99()), benchkit.Ms(ol.submit.P50()), benchkit.Ms(ol.submit.P99()), benchkit.Ms(rl.insert.P50()), benchkit.Ms(rl.insert.P99()))
	r.Detail("under load, River: %d jobs inserted at %.0f/s; a start seen before the commit counts as 0 (ours %d, River %d)",
		rl.n, rl.rate, ol.early, rl.early)
	r.Detail("under load, the pools: ours (%d connections, shared by intake, steps, dispatcher, relay) %s; River (%d) %s",
		p.app.Pool.Stat().MaxConns(), ol.pool, rv.pool.Stat().MaxConns(), rl.pool)
	return nil
}

// poolWait is how long acquisitions of a pool waited for a free
// connection over a window (pgxpool's counters).
type poolWait struct {
	acquires, empty int64
	waited          time.Duration
}

func poolStat(p *pgxpool.Pool) poolWait {
	s := p.Stat()
	return poolWait{acquires: s.AcquireCount(), empty: s.EmptyAcquireCount(), waited: s.EmptyAcquireWaitTime()}
}

func (w poolWait) since(before poolWait) poolWait {
	return poolWait{acquires: w.acquires - before.acquires, empty: w.empty - before.empty, waited: w.waited - before.waited}
}

func (w *poolWait) add(o poolWait) {
	w.acquires, w.empty, w.waited = w.acquires+o.acquires, w.empty+o.empty, w.waited+o.waited
}

func (w poolWait) String() string {
	mean := time.Duration(0)
	if w.empty > 0 {
		mean = w.waited / time.Duration(w.empty)
	}
	return fmt.Sprintf("%d acquisitions, %.0f%% of them waited for a connection (mean wait %s)",
		w.acquires, 100*benchkit.Ratio(float64(w.empty), float64(w.acquires)), benchkit.Ms(mean))
}

// ourQueue submits requests and reads their first steps' starts from the
// platform's marks.
type ourQueue struct {
	p       *platform
	threads []string
	next    int
}

func newOurQueue(p *platform, threads []string) *ourQueue { return &ourQueue{p: p, threads: threads} }

// isolated submits one request on the next thread and waits for its run to
// end; it returns commit → start of step 1.
func (o *ourQueue) isolated(ctx context.Context, tag string, i int) (time.Duration, error) {
	th := o.threads[o.next%len(o.threads)]
	o.next++
	in, err := o.p.app.Queue.Submit(ctx, queue.Submission{Subject: o.p.sub, Query: "hi", AgentSlug: "default-chatbot", ThreadID: th,
		RequestID: fmt.Sprintf("bench-%s-%d", tag, i)})
	if err != nil {
		return 0, err
	}
	committed, ok := o.p.committed(th)
	if !ok {
		return 0, fmt.Errorf("no queue notice seen for thread %s", th)
	}
	if in.RunID == nil {
		return 0, fmt.Errorf("isolated submission on thread %s was %s, not dispatched", th, in.Status)
	}
	id, m := *in.RunID, o.p.marks
	var start time.Time
	err = m.wait(ctx, 30*time.Second, func() bool {
		_, done := m.finished[id]
		if s := m.starts[id]; len(s) > 0 {
			start = s[0]
		}
		return done
	})
	if err != nil {
		return 0, fmt.Errorf("run %s: %w", id, err)
	}
	return max(0, start.Sub(committed)), nil
}

// handoff submits two requests on the next thread, the second while the
// first's run is still going, and returns the second's wait from the end of
// the first run (its finished_at, server clock) to the start of its own first
// step: the dispatcher's hand-off to a queued request. ok is false when the
// first run ended before the second submission (nothing was queued).
func (o *ourQueue) handoff(ctx context.Context, i int) (d time.Duration, ok bool, err error) {
	th := o.threads[o.next%len(o.threads)]
	o.next++
	m := o.p.marks
	m.mu.Lock()
	before := len(m.finished)
	m.mu.Unlock()
	var ins [2]queue.Intake
	for k := range ins {
		ins[k], err = o.p.app.Queue.Submit(ctx, queue.Submission{Subject: o.p.sub, Query: "hi", AgentSlug: "default-chatbot", ThreadID: th,
			RequestID: fmt.Sprintf("bench-h-%d-%d", i, k)})
		if err != nil {
			return 0, false, err
		}
	}
	if ins[0].RunID == nil {
		return 0, false, fmt.Errorf("first submission on thread %s was %s, not dispatched", th, ins[0].Status)
	}
	if err := m.wait(ctx, 30*time.Second, func() bool { return len(m.finished) >= before+2 }); err != nil {
		return 0, false, fmt.Errorf("hand-off on thread %s: %w", th, err)
	}
	if ins[1].RunID != nil {
		return 0, false, nil
	}
	req, err := o.p.app.Queue.GetRequest(ctx, o.p.sub.UID, ins[1].RequestID)
	if err != nil {
		return 0, false, err
	}
	if req.DispatchedRunID == nil {
		return 0, false, fmt.Errorf("queued request %s was not dispatched after the run before it", req.RequestID)
	}
	starts, _ := m.snapshot()
	s := starts[*req.DispatchedRunID]
	if len(s) == 0 {
		return 0, false, fmt.Errorf("run %s of queued request %s has no step", *req.DispatchedRunID, req.RequestID)
	}
	prev, err := o.p.app.Runs.Get(ctx, *ins[0].RunID)
	if err != nil {
		return 0, false, err
	}
	if prev.FinishedAt == nil {
		return 0, false, fmt.Errorf("run %s ended without finished_at", prev.ID)
	}
	return s[0].Sub(*prev.FinishedAt), true, nil
}

// ourLoad is what load measured.
type ourLoad struct {
	n                       int
	rate                    float64
	all, atOnce, queued     benchkit.Samples // commit → start of step 1
	toRelay, toHandler      benchkit.Samples // atOnce split: commit → relay hands step.ready to the bus → handler entered
	handoff                 benchkit.Samples // queued ones: previous run's finished_at → start of step 1
	submit                  benchkit.Samples // Submit's own latency
	violations, lost, early int
	violatingThreads        int
	outOfOrder, overlaps    int // the violations: started before the previous request's run started; before it finished
	pool                    poolWait
	peakInFlight            int64 // most publications under way on the bus at once
}

func (l *ourLoad) add(o ourLoad) {
	l.rate = (l.rate*float64(l.n) + o.rate*float64(o.n)) / float64(l.n+o.n)
	l.n += o.n
	l.all, l.atOnce, l.queued = append(l.all, o.all...), append(l.atOnce, o.atOnce...), append(l.queued, o.queued...)
	l.handoff, l.submit = append(l.handoff, o.handoff...), append(l.submit, o.submit...)
	l.toRelay, l.toHandler = append(l.toRelay, o.toRelay...), append(l.toHandler, o.toHandler...)
	l.violations, l.lost, l.early = l.violations+o.violations, l.lost+o.lost, l.early+o.early
	l.violatingThreads += o.violatingThreads
	l.outOfOrder, l.overlaps = l.outOfOrder+o.outOfOrder, l.overlaps+o.overlaps
	l.pool.add(o.pool)
	l.peakInFlight = max(l.peakInFlight, o.peakInFlight)
}

type ourRequest struct {
	thread, seq int
	committed   time.Time
	queued      bool
	submit      time.Duration
}

// load submits total requests at rate per second, each on a thread picked
// at random (submissions on one thread in order, one at a time), waits for
// every run to end, and checks each thread's order.
func (o *ourQueue) load(ctx context.Context, round, total, rate int) (ourLoad, error) {
	rng := rand.New(rand.NewPCG(1, uint64(round)))
	locks := make([]sync.Mutex, len(o.threads))
	seqs := make([]int, len(o.threads))
	var mu sync.Mutex
	reqs := map[string]*ourRequest{}
	_, finishedBefore := o.p.marks.snapshot()
	pool0 := poolStat(o.p.app.Pool)
	o.p.bus.resetPeak()

	issued, err := openLoop(ctx, total, rate, func(ctx context.Context, _ int) func() error {
		ti := rng.IntN(len(o.threads)) // setup runs serially: rng needs no lock
		return func() error {
			locks[ti].Lock()
			defer locks[ti].Unlock()
			seq := seqs[ti]
			seqs[ti]++
			rid := fmt.Sprintf("bench-l%d-%d-%d", round, ti, seq)
			t0 := time.Now()
			in, err := o.p.app.Queue.Submit(ctx, queue.Submission{Subject: o.p.sub, Query: "hi", AgentSlug: "default-chatbot",
				ThreadID: o.threads[ti], RequestID: rid})
			now := time.Now()
			if err != nil {
				return fmt.Errorf("submit on thread %s: %w", o.threads[ti], err)
			}
			committed, ok := o.p.committed(o.threads[ti])
			if !ok || committed.Before(t0) {
				return fmt.Errorf("no queue notice seen for the submission on thread %s", o.threads[ti])
			}
			mu.Lock()
			reqs[rid] = &ourRequest{thread: ti, seq: seq, committed: committed, queued: in.RunID == nil, submit: now.Sub(t0)}
			mu.Unlock()
			return nil
		}
	})
	if err != nil {
		return ourLoad{}, err
	}
	res := ourLoad{n: total, rate: issued}
	m := o.p.marks
	want := len(finishedBefore) + total
	if err := m.wait(ctx, 2*time.Minute, func() bool { return len(m.finished) >= want }); err != nil {
		m.mu.Lock()
		got := len(m.finished) - len(finishedBefore)
		m.mu.Unlock()
		return ourLoad{}, fmt.Errorf("%d of %d runs ended: %w", got, total, err)
	}
	starts, _ := m.snapshot()
	res.pool = poolStat(o.p.app.Pool).since(pool0)
	res.peakInFlight = o.p.bus.peak.Load()

	// Which request each run served.
	byReq := map[string]string{} // request → run
	rows := map[string]runs.Run{}
	for runID := range starts {
		if _, old := finishedBefore[runID]; old {
			continue
		}
		rn, err := o.p.app.Runs.Get(ctx, runID)
		if err != nil {
			return ourLoad{}, fmt.Errorf("run %s: %w", runID, err)
		}
		if strings.HasPrefix(rn.RequestID, fmt.Sprintf("bench-l%d-", round)) {
			byReq[rn.RequestID] = runID
			rows[runID] = rn
		}
	}
	perThread := map[int][]string{}
	for rid, q := range reqs {
		perThread[q.thread] = append(perThread[q.thread], rid)
		res.submit = append(res.submit, q.submit)
		runID, ok := byReq[rid]
		if !ok || len(starts[runID]) == 0 {
			res.lost++
			continue
		}
		d := starts[runID][0].Sub(q.committed)
		if d < 0 {
			res.early++
			d = 0
		}
		res.all = append(res.all, d)
		if q.queued {
			res.queued = append(res.queued, d)
		} else {
			res.atOnce = append(res.atOnce, d)
			if h, ok := o.p.marks.handedAt(runID); ok {
				res.toRelay = append(res.toRelay, max(0, h.Sub(q.committed)))
				res.toHandler = append(res.toHandler, max(0, starts[runID][0].Sub(h)))
			}
		}
	}
	// FIFO per thread, read from the runs' own rows (started_at set by the
	// claim, finished_at by the end, both server clock): in submission
	// order, each request's run starts after the previous request's run
	// started and after it finished — one run at a time. The hand-off of a
	// queued request is measured from the previous run's finished_at (the
	// run.finished event itself may wait for a relay slot) to its first step.
	for _, rids := range perThread {
		sort.Slice(rids, func(a, b int) bool { return reqs[rids[a]].seq < reqs[rids[b]].seq })
		bad := 0
		for k := 1; k < len(rids); k++ {
			prev, cur := rows[byReq[rids[k-1]]], rows[byReq[rids[k]]]
			if prev.ID == "" || cur.ID == "" {
				continue // counted as lost
			}
			if prev.StartedAt == nil || cur.StartedAt == nil || prev.FinishedAt == nil {
				return ourLoad{}, fmt.Errorf("runs %s, %s: started_at or finished_at missing", prev.ID, cur.ID)
			}
			switch {
			case cur.StartedAt.Before(*prev.StartedAt):
				bad++
				res.outOfOrder++
			case cur.StartedAt.Before(*prev.FinishedAt):
				bad++
				res.overlaps++
			}
			if reqs[rids[k]].queued {
				res.handoff = append(res.handoff, max(0, starts[cur.ID][0].Sub(*prev.FinishedAt)))
			}
		}
		res.violations += bad
		if bad > 0 {
			res.violatingThreads++
		}
	}
	return res, nil
}

// openLoop starts op(i) for i in [0, total) at rate per second, each in its
// own goroutine, at most maxInFlight at once, without waiting for earlier
// ones (an open loop: a slow system gets more in flight, not fewer
// requests). setup runs serially in the caller's goroutine and returns the
// work to run concurrently. It returns the achieved issue rate.
func openLoop(ctx context.Context, total, rate int, setup func(ctx context.Context, i int) func() error) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, maxInFlight)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	interval := time.Second / time.Duration(rate)
	t0 := time.Now()
	for i := range total {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		work := setup(ctx, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := work(); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	issued := time.Since(t0)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(total) / issued.Seconds(), nil
}

// River: a no-op job kind whose worker notes when it starts.

type noopArgs struct {
	Seq int `json:"seq"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	rv *riverBench
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[noopArgs]) error {
	w.rv.worked(job.Args.Seq, time.Now())
	return nil
}

type riverBench struct {
	client *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	mu     sync.Mutex
	seq    int
	starts map[int]time.Time
	wake   chan int
}

// startRiver migrates River into its own schema of db and starts a client
// with River's defaults (fetch cooldown, poll interval) and a pool of the
// size every function of ours gets.
func startRiver(ctx context.Context, e *env, db benchkit.DB) (*riverBench, error) {
	pool, err := postgres.Open(ctx, db.URL, riverPool)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+riverSchema); err != nil {
		pool.Close()
		return nil, err
	}
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: riverSchema})
	if err == nil {
		_, err = mig.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("River migrations: %w", err)
	}
	rv := &riverBench{pool: pool, starts: map[int]time.Time{}, wake: make(chan int, 1024)}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{rv: rv})
	rv.client, err = river.NewClient(driver, &river.Config{
		Schema:  riverSchema,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverWorkers}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(e.Log, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err == nil {
		err = rv.client.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("River client: %w", err)
	}
	return rv, nil
}

func (rv *riverBench) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rv.client.Stop(ctx)
	rv.pool.Close()
}

func (rv *riverBench) worked(seq int, at time.Time) {
	rv.mu.Lock()
	if _, ok := rv.starts[seq]; !ok {
		rv.starts[seq] = at
	}
	rv.mu.Unlock()
	select {
	case rv.wake <- seq:
	default:
	}
}

func (rv *riverBench) nextSeq() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.seq++
	return rv.seq
}

// isolated inserts one job and waits for it to start: Insert's return → Work.
func (rv *riverBench) isolated(ctx context.Context) (time.Duration, error) {
	seq := rv.nextSeq()
	if _, err := rv.client.Insert(ctx, noopArgs{Seq: seq}, nil); err != nil {
		return 0, fmt.Errorf("River insert: %w", err)
	}
	committed := time.Now()
	timeout := time.After(30 * time.Second)
	for {
		rv.mu.Lock()
		start, ok := rv.starts[seq]
		rv.mu.Unlock()
		if ok {
			return max(0, start.Sub(committed)), nil
		}
		select {
		case <-rv.wake:
		case <-timeout:
			return 0, fmt.Errorf("River job %d did not start within 30s", seq)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

type riverLoad struct {
	n      int
	rate   float64
	lat    benchkit.Samples
	insert benchkit.Samples
	early  int
	pool   poolWait
}

func (l *riverLoad) add(o riverLoad) {
	l.rate = (l.rate*float64(l.n) + o.rate*float64(o.n)) / float64(l.n+o.n)
	l.n += o.n
	l.lat, l.insert, l.early = append(l.lat, o.lat...), append(l.insert, o.insert...), l.early+o.early
	l.pool.add(o.pool)
}

// load inserts total jobs at rate per second and waits for all to start.
func (rv *riverBench) load(ctx context.Context, total, rate int) (riverLoad, error) {
	var mu sync.Mutex
	pool0 := poolStat(rv.pool)
	committed := map[int]time.Time{}
	var inserts benchkit.Samples
	issued, err := openLoop(ctx, total, rate, func(ctx context.Context, _ int) func() error {
		seq := rv.nextSeq()
		return func() error {
			t0 := time.Now()
			if _, err := rv.client.Insert(ctx, noopArgs{Seq: seq}, nil); err != nil {
				return fmt.Errorf("River insert: %w", err)
			}
			now := time.Now()
			mu.Lock()
			committed[seq] = now
			inserts = append(inserts, now.Sub(t0))
			mu.Unlock()
			return nil
		}
	})
	if err != nil {
		return riverLoad{}, err
	}
	res := riverLoad{n: total, rate: issued, insert: inserts}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rv.mu.Lock()
		missing := 0
		for seq := range committed {
			if _, ok := rv.starts[seq]; !ok {
				missing++
			}
		}
		rv.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			return riverLoad{}, fmt.Errorf("%d of %d River jobs did not start within 2 minutes", missing, total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.pool = poolStat(rv.pool).since(pool0)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for seq, c := range committed {
		d := rv.starts[seq].Sub(c)
		if d < 0 {
			res.early++
			d = 0
		}
		res.lat = append(res.lat, d)
	}
	return res, nil
}
