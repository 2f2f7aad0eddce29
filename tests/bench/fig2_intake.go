package main

import (
	"context"
	"fmt"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 2: run submission latency under concurrency, against a durable
// commit under the same concurrency.
const (
	intakeClients    = 50  // concurrent submitters, and concurrent floor goroutines
	intakeSSE        = 200 // SSE clients connected throughout
	intakeRounds     = 5   // alternating floor and intake bursts
	intakePerRound   = 8   // requests (commits) per client per burst
	intakeWarmPer    = 2   // untimed requests per client first
	intakeRatioLimit = 2.5 // p99 ≤ 2.5× floor p99 (issue 7; was 3×)
)

func figIntake(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[2] intake POST /api/agent/runs at 50 concurrent clients, 200 SSE clients connected",
		"the intake function as its own process (events go to a sink that accepts them); each request is a new message on its own thread "+
			"and dispatches a run; floor: 50 goroutines doing BEGIN; INSERT; COMMIT (pgx, same pool settings, same database); "+
			"bursts alternate floor, intake, floor, intake…")
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	in, err := e.startIntake(ctx, db, prefix)
	if err != nil {
		return err
	}
	defer in.stop()

	e.Progress("figure 2: opening %d SSE streams", intakeSSE)
	sseRuns, err := in.api.openRuns(ctx, intakeSSE)
	if err != nil {
		return err
	}
	st, err := in.api.openStreams(ctx, sseRuns, nil)
	if err != nil {
		return err
	}
	defer st.close()

	perClient := intakeWarmPer + intakeRounds*intakePerRound
	threads, err := in.api.threads(ctx, intakeClients*perClient)
	if err != nil {
		return err
	}
	floor, err := benchkit.OpenCommitFloor(ctx, db.URL)
	if err != nil {
		return err
	}
	defer floor.Close()

	submit := func(offset int) func(ctx context.Context, w, i int) (time.Duration, error) {
		return func(ctx context.Context, w, i int) (time.Duration, error) {
			t0 := time.Now()
			_, err := in.api.submit(ctx, threads[w*perClient+offset+i])
			return time.Since(t0), err
		}
	}
	commit := func(ctx context.Context, _, _ int) (time.Duration, error) { return floor.Once(ctx) }

	e.Progress("figure 2: %d rounds of %d×%d commits and %d×%d submissions", intakeRounds, intakeClients, intakePerRound, intakeClients, intakePerRound)
	if _, err := benchkit.Concurrently(ctx, intakeClients, intakeWarmPer, submit(0)); err != nil {
		return fmt.Errorf("warm-up submission: %w", err)
	}
	if _, err := benchkit.Concurrently(ctx, intakeClients, intakeWarmPer, commit); err != nil {
		return fmt.Errorf("warm-up commit: %w", err)
	}
	var subLat, floorLat benchkit.Samples
	for round := range intakeRounds {
		f, err := benchkit.Concurrently(ctx, intakeClients, intakePerRound, commit)
		if err != nil {
			return fmt.Errorf("floor commit: %w", err)
		}
		s, err := benchkit.Concurrently(ctx, intakeClients, intakePerRound, submit(intakeWarmPer+round*intakePerRound))
		if err != nil {
			return fmt.Errorf("submission: %w", err)
		}
		floorLat, subLat = append(floorLat, f...), append(subLat, s...)
	}
	if err := st.err(); err != nil {
		return err
	}

	p99, f99 := subLat.P99(), floorLat.P99()
	rr := benchkit.DurRatio(p99, f99)
	r.Line("intake_submit_p99", benchkit.Ms(p99), benchkit.X(rr)+" vs floor "+benchkit.Ms(f99)+" (commit p99 at 50 goroutines)",
		fmt.Sprintf("≤ %.1f×", intakeRatioLimit), rr <= intakeRatioLimit)
	r.Detail("p50 %s (floor p50 %s, %s); %d submissions, %d floor commits; %d SSE clients stayed connected; sink received %d events",
		benchkit.Ms(subLat.P50()), benchkit.Ms(floorLat.P50()), benchkit.X(benchkit.DurRatio(subLat.P50(), floorLat.P50())), len(subLat), len(floorLat), intakeSSE, in.sink.events.Load())
	return nil
}
