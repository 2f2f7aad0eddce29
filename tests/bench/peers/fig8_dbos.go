package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 8: a 10-step durable workflow of no-op steps, ours against DBOS
// Transact's, with figure 1's commit as the floor.
const (
	wfSteps       = 10  // steps per workflow
	wfWarm        = 20  // untimed workflows of each kind first (statement caches of the pool's connections)
	dbosRatioMax  = 1.0 // our step p50 ≤ DBOS's
	floorRatioMax = 2.0 // our step p50 ≤ 2× the bare commit
)

func figDBOS(ctx context.Context, e *env, r *benchkit.Report) error {
	n, counted := e.sizes.workflows, e.sizes.counted
	r.Section("[8] durable step vs DBOS Transact Go (10-step workflows of no-op steps)",
		"ours: a run whose in-process model calls a no-op tool on 9 turns and answers on the 10th, through the real agent-step, "+
			"tool-invoke and dispatcher handlers on the in-process bus (a step = one model turn, its commit, its tool call and the fan-in that readies the next); "+
			"DBOS: a workflow of 10 dbos.RunAsStep no-op steps; step time = start of a step to start of the next (the last: to the run's end "+
			"committed / GetResult); floor: BEGIN; INSERT; COMMIT; workflows alternate ours, DBOS, 10 floor commits; all on one database")
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()

	p, err := e.openPlatform(ctx, db, prefix, scriptedModels{toolSteps: wfSteps - 1})
	if err != nil {
		return err
	}
	defer p.close()
	floor, err := benchkit.OpenCommitFloor(ctx, db.URL)
	if err != nil {
		return err
	}
	defer floor.Close()
	threads, err := p.threads(ctx, wfWarm+counted+n)
	if err != nil {
		return err
	}
	ours := &ourWorkflows{p: p, threads: threads}

	// Our commits are counted before DBOS is launched, so that its
	// background polling is not in our window (and ours is idle in its).
	e.Progress("figure 8: counting the commits of %d of our workflows", counted)
	for range wfWarm {
		if _, err := ours.run(ctx); err != nil {
			return err
		}
	}
	ourCount, err := e.countCommits(ctx, db, counted, ours.run, p.app.Pool, floor.Pool)
	if err != nil {
		return fmt.Errorf("count our commits: %w", err)
	}

	prof, err := e.profileOurs(ctx, db, 3)
	if err != nil {
		return fmt.Errorf("profile our statements: %w", err)
	}

	dprof, err := e.profileDBOS(ctx, db, 3)
	if err != nil {
		return fmt.Errorf("profile DBOS statements: %w", err)
	}

	dpool, err := postgres.Open(ctx, db.URL, 0) // the pool settings every function of ours gets
	if err != nil {
		return err
	}
	defer dpool.Close()
	theirs, err := launchDBOS(ctx, dpool)
	if err != nil {
		return err
	}
	defer theirs.shutdown()
	e.Progress("figure 8: counting the commits of %d DBOS workflows", counted)
	for range wfWarm {
		if _, err := theirs.run(ctx); err != nil {
			return err
		}
	}
	dbosCount, err := e.countCommits(ctx, db, counted, theirs.run, p.app.Pool, floor.Pool, dpool)
	if err != nil {
		return fmt.Errorf("count DBOS commits: %w", err)
	}

	e.Progress("figure 8: timing %d workflows of each kind and %d floor commits", n, n*wfSteps)
	var ourSteps, dbosSteps, floorLat, ourWF, dbosWF benchkit.Samples
	for range n {
		s, err := ours.run(ctx)
		if err != nil {
			return err
		}
		ourSteps, ourWF = append(ourSteps, s.steps...), append(ourWF, s.total)
		if s, err = theirs.run(ctx); err != nil {
			return err
		}
		dbosSteps, dbosWF = append(dbosSteps, s.steps...), append(dbosWF, s.total)
		for range wfSteps {
			d, err := floor.Once(ctx)
			if err != nil {
				return fmt.Errorf("floor commit: %w", err)
			}
			floorLat = append(floorLat, d)
		}
	}

	o50, d50, f50 := ourSteps.P50(), dbosSteps.P50(), floorLat.P50()
	o99, d99, f99 := ourSteps.P99(), dbosSteps.P99(), floorLat.P99()
	rd, rf := benchkit.DurRatio(o50, d50), benchkit.DurRatio(o50, f50)
	r.Line("step_p50_vs_dbos", benchkit.Ms(o50), fmt.Sprintf("%s DBOS %s", benchkit.X(rd), benchkit.Ms(d50)), fmt.Sprintf("≤ %.0f×", dbosRatioMax), rd <= dbosRatioMax)
	r.Line("step_p50_vs_floor", benchkit.Ms(o50), fmt.Sprintf("%s floor %s", benchkit.X(rf), benchkit.Ms(f50)), fmt.Sprintf("≤ %.0f×", floorRatioMax), rf <= floorRatioMax)
	r.Line("step_p99", benchkit.Ms(o99), fmt.Sprintf("%s DBOS %s, %s floor %s", benchkit.X(benchkit.DurRatio(o99, d99)), benchkit.Ms(d99), benchkit.X(benchkit.DurRatio(o99, f99)), benchkit.Ms(f99)), "", false)
	r.Line("dbos_step_p50", benchkit.Ms(d50), fmt.Sprintf("%s floor %s", benchkit.X(benchkit.DurRatio(d50, f50)), benchkit.Ms(f50)), "", false)
	r.Line("commits_per_step", fmt.Sprintf("%.2f", ourCount.perStep()),
		fmt.Sprintf("%s DBOS %.2f, floor 1 per INSERT+COMMIT", benchkit.X(benchkit.Ratio(ourCount.perStep(), dbosCount.perStep())), dbosCount.perStep()), "", false)
	r.Detail("workflow end to end (ours: submit → run.finished published; DBOS: RunWorkflow → GetResult): ours p50 %s p99 %s, DBOS p50 %s p99 %s",
		benchkit.Ms(ourWF.P50()), benchkit.Ms(ourWF.P99()), benchkit.Ms(dbosWF.P50()), benchkit.Ms(dbosWF.P99()))
	ourCount.print(r, "ours")
	prof.print(r)
	dbosCount.print(r, "DBOS")
	dprof.print(r)
	r.Detail("%d timed workflows of each kind (%d step samples each), %d floor commits; %d + %d workflows counted",
		n, len(ourSteps), len(floorLat), counted, counted)
	return nil
}

// wfSample is one workflow: the duration of each of its steps, and its end to end.
type wfSample struct {
	steps benchkit.Samples
	total time.Duration
}

// ourWorkflows submits one message per workflow on a fresh thread (as POST
// /api/agent/runs does) and waits for the run's end.
type ourWorkflows struct {
	p       *platform
	threads []string
	next    int
}

func (o *ourWorkflows) run(ctx context.Context) (wfSample, error) {
	if o.next == len(o.threads) {
		return wfSample{}, fmt.Errorf("out of threads")
	}
	th := o.threads[o.next]
	o.next++
	t0 := time.Now()
	in, err := o.p.app.Queue.Submit(ctx, queue.Submission{Subject: o.p.sub, Query: "go", AgentSlug: "default-chatbot", ThreadID: th})
	if err != nil {
		return wfSample{}, err
	}
	if in.RunID == nil {
		return wfSample{}, fmt.Errorf("submission on thread %s was %s, not dispatched", th, in.Status)
	}
	id := *in.RunID
	m := o.p.marks
	var starts []time.Time
	var end time.Time
	err = m.wait(ctx, 30*time.Second, func() bool {
		var ok bool
		end, ok = m.finished[id]
		starts = m.starts[id]
		return ok
	})
	if err != nil {
		return wfSample{}, fmt.Errorf("run %s: %w", id, err)
	}
	if len(starts) != wfSteps {
		return wfSample{}, fmt.Errorf("run %s finished after %d steps, want %d", id, len(starts), wfSteps)
	}
	return stepTimes(starts, end, t0), nil
}

// stepTimes turns the starts of a workflow's steps and its end into step
// durations.
func stepTimes(starts []time.Time, end, t0 time.Time) wfSample {
	s := wfSample{total: end.Sub(t0)}
	for i, t := range starts {
		next := end
		if i+1 < len(starts) {
			next = starts[i+1]
		}
		s.steps = append(s.steps, next.Sub(t))
	}
	return s
}

// dbosWorkflows runs DBOS workflows of wfSteps no-op steps.
type dbosWorkflows struct {
	ctx dbos.Context
	mu  sync.Mutex
	// starts of the steps of the workflow being run (one at a time).
	starts []time.Time
}

// launchDBOS starts DBOS on pool (its system database is the bench
// database, its tables in the dbos schema) with the workflow registered.
func launchDBOS(ctx context.Context, pool *pgxpool.Pool) (*dbosWorkflows, error) {
	d := &dbosWorkflows{}
	dctx, err := dbos.NewContext(context.WithoutCancel(ctx), dbos.Config{AppName: "yuxi-bench", SystemDBPool: pool,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("DBOS: %w", err)
	}
	d.ctx = dctx
	dbos.RegisterWorkflow(dctx, d.workflow, dbos.WithWorkflowName("bench-ten-steps"))
	if err := dbos.Launch(dctx); err != nil {
		return nil, fmt.Errorf("launch DBOS: %w", err)
	}
	return d, nil
}

func (d *dbosWorkflows) shutdown() { _ = dbos.Shutdown(d.ctx, 5*time.Second) }

// workflow is the DBOS workflow: wfSteps steps that note their start and
// return their number (checkpointed by DBOS).
func (d *dbosWorkflows) workflow(ctx dbos.Context, _ int) (int, error) {
	sum := 0
	for i := range wfSteps {
		v, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) {
			d.mu.Lock()
			d.starts = append(d.starts, time.Now())
			d.mu.Unlock()
			return i, nil
		}, dbos.WithStepName(fmt.Sprintf("noop-%d", i)))
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func (d *dbosWorkflows) run(context.Context) (wfSample, error) {
	d.mu.Lock()
	d.starts = d.starts[:0]
	d.mu.Unlock()
	t0 := time.Now()
	h, err := dbos.RunWorkflow(d.ctx, d.workflow, 0)
	if err != nil {
		return wfSample{}, fmt.Errorf("DBOS workflow: %w", err)
	}
	if _, err := h.GetResult(); err != nil {
		return wfSample{}, fmt.Errorf("DBOS workflow %s: %w", h.GetWorkflowID(), err)
	}
	end := time.Now()
	d.mu.Lock()
	starts := append([]time.Time(nil), d.starts...)
	d.mu.Unlock()
	if len(starts) != wfSteps {
		return wfSample{}, fmt.Errorf("DBOS workflow ran %d steps, want %d", len(starts), wfSteps)
	}
	return stepTimes(starts, end, t0), nil
}

// commitCount is what countCommits saw.
type commitCount struct {
	workflows         int
	commits, rollback int64
	window            time.Duration
}

func (c commitCount) perStep() float64 { return float64(c.commits) / float64(c.workflows*wfSteps) }

func (c commitCount) print(r *benchkit.Report, who string) {
	steps := float64(c.workflows * wfSteps)
	r.Detail("%s: pg_stat_database xact_commit %d over %d workflows = %.2f per step, %.1f per workflow; xact_rollback %.2f per step "+
		"(every transaction counts: read-only statements, rolled-back lookups; the %s window includes background work)",
		who, c.commits, c.workflows, c.perStep(), float64(c.commits)/float64(c.workflows), float64(c.rollback)/steps, c.window.Round(time.Millisecond))
}

// countCommits runs n workflows and returns the database's xact_commit
// delta around them, each pool's pending statistics published first and
// the flushing statements subtracted.
func (e *env) countCommits(ctx context.Context, db benchkit.DB, n int, wf func(context.Context) (wfSample, error), pools ...*pgxpool.Pool) (commitCount, error) {
	flushed, err := flushStats(ctx, pools...)
	if err != nil {
		return commitCount{}, err
	}
	_ = flushed
	c0, r0, err := e.dbCommits(ctx, db.Name)
	if err != nil {
		return commitCount{}, err
	}
	t0 := time.Now()
	for range n {
		if _, err := wf(ctx); err != nil {
			return commitCount{}, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the relay's last acknowledgement batch (every 20ms)
	window := time.Since(t0)
	flushed, err = flushStats(ctx, pools...)
	if err != nil {
		return commitCount{}, err
	}
	c1, r1, err := e.dbCommits(ctx, db.Name)
	if err != nil {
		return commitCount{}, err
	}
	return commitCount{workflows: n, commits: c1 - c0 - int64(flushed), rollback: r1 - r0, window: window}, nil
}
