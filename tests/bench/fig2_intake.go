package main

import (
	"context"
	"fmt"
	"time"
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

func figIntake(ctx context.Context, e *env, r *report) error {
	r.section("[2] intake POST /api/agent/runs at 50 concurrent clients, 200 SSE clients connected",
		"the intake function as its own process (events go to a sink that accepts them); each request is a new message on its own thread "+
			"and dispatches a run; floor: 50 goroutines doing BEGIN; INSERT; COMMIT (pgx, same pool settings, same database); "+
			"bursts alternate floor, intake, floor, intake…")
	db, err := e.newDatabase(ctx)
	if err != nil {
		return err
	}
	defer e.dropDatabase(db)
	prefix := newPrefix()
	defer e.dropPrefix(prefix)
	in, err := e.startIntake(ctx, db, prefix)
	if err != nil {
		return err
	}
	defer in.stop()

	e.progress("figure 2: opening %d SSE streams", intakeSSE)
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
	floor, err := openCommitFloor(ctx, db.URL)
	if err != nil {
		return err
	}
	defer floor.close()

	submit := func(offset int) func(ctx context.Context, w, i int) (time.Duration, error) {
		return func(ctx context.Context, w, i int) (time.Duration, error) {
			t0 := time.Now()
			_, err := in.api.submit(ctx, threads[w*perClient+offset+i])
			return time.Since(t0), err
		}
	}
	commit := func(ctx context.Context, _, _ int) (time.Duration, error) { return floor.once(ctx) }

	e.progress("figure 2: %d rounds of %d×%d commits and %d×%d submissions", intakeRounds, intakeClients, intakePerRound, intakeClients, intakePerRound)
	if _, err := concurrently(ctx, intakeClients, intakeWarmPer, submit(0)); err != nil {
		return fmt.Errorf("warm-up submission: %w", err)
	}
	if _, err := concurrently(ctx, intakeClients, intakeWarmPer, commit); err != nil {
		return fmt.Errorf("warm-up commit: %w", err)
	}
	var subLat, floorLat samples
	for round := range intakeRounds {
		f, err := concurrently(ctx, intakeClients, intakePerRound, commit)
		if err != nil {
			return fmt.Errorf("floor commit: %w", err)
		}
		s, err := concurrently(ctx, intakeClients, intakePerRound, submit(intakeWarmPer+round*intakePerRound))
		if err != nil {
			return fmt.Errorf("submission: %w", err)
		}
		floorLat, subLat = append(floorLat, f...), append(subLat, s...)
	}
	if err := st.err(); err != nil {
		return err
	}

	p99, f99 := subLat.p99(), floorLat.p99()
	rr := durRatio(p99, f99)
	r.line("intake_submit_p99", ms(p99), x(rr)+" vs floor "+ms(f99)+" (commit p99 at 50 goroutines)",
		fmt.Sprintf("≤ %.1f×", intakeRatioLimit), rr <= intakeRatioLimit)
	r.detail("p50 %s (floor p50 %s, %s); %d submissions, %d floor commits; %d SSE clients stayed connected; sink received %d events",
		ms(subLat.p50()), ms(floorLat.p50()), x(durRatio(subLat.p50(), floorLat.p50())), len(subLat), len(floorLat), intakeSSE, in.sink.events.Load())
	return nil
}
