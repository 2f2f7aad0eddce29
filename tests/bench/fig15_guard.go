package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/contentguard"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/sysconfig"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 15: the content guard's keyword check per streamed chunk, with a
// 10,000-word list, against SSE delivery — measured on the output path:
// agentstep.Handle with the production wiring (the chat kit's guard over
// the system settings, stored through sysconfig as PUT /api/system/config
// does, the run stream's batcher on Redis), a model streaming guardDeltas
// deltas per turn. The model times each delta callback (the step's scan of
// the delta, then its forward to the stream batcher); steps with the guard
// on and off alternate, and the check's cost per chunk is the difference of
// the two callbacks' p50. The denominator is figure 3's floor measured again
// here the same way (bare XADD → XREAD BLOCK, p50): the platform's SSE
// delivery is slower than its floor, so the ratio printed is an upper bound
// of the check's share of a delivered chunk.
const (
	guardWords   = 10000
	guardTarget  = 0.05
	guardFloorN  = 300
	guardChunkSz = 24  // runes per chunk: a model delta is a few tokens
	guardDeltas  = 200 // deltas per model turn
	guardWarm    = 10  // steps of each kind before timing
	guardSteps   = 60  // timed steps of each kind (12,000 deltas each)
)

func figGuard(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[15] content guard keyword check per streamed chunk (10,000 keywords) on agent-step's output path ÷ SSE delivery p50",
		"agentstep.Handle (production wiring: the chat kit's guard over the system settings, the Redis run stream) with a model "+
			"streaming 200 deltas of 24 runes containing no keyword (a full scan, the common case); the model times each delta "+
			"callback (scan + forward to the stream batcher); steps with the guard on (enable_content_guard, 10,000 mixed "+
			"Chinese/English keywords) and off alternate; check = p50(on) − p50(off); denominator: figure 3's SSE delivery floor "+
			"(XADD → XREAD BLOCK, p50), measured in this run")
	rng := rand.New(rand.NewPCG(15, 15))
	kws, chunks := guardCorpus(rng)

	// The process's bus does not execute steps: the figure hands the
	// recorded StepReady events to the handler.
	app, rec, _, release, err := e.stepProcess(ctx)
	if err != nil {
		return err
	}
	defer release()
	cfg := app.Config
	steps, err := createRuns(ctx, app, rec, 2*(guardWarm+guardSteps)+1)
	if err != nil {
		return err
	}

	// The keyword list through the settings store, as PUT /api/system/config
	// stores it; the kit's guard sees the version move within CheckEvery.
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	if _, err := sysconfig.New(app.Pool, app.Redis, cfg.RedisPrefix).Set(ctx, 0, map[string]json.RawMessage{
		"enable_content_guard": raw(true), "content_guard_keywords": raw(kws)}); err != nil {
		return fmt.Errorf("store the keyword list: %w", err)
	}
	built := time.Now()
	for {
		scan, err := app.Guard.Scanner(ctx)
		if err != nil {
			return err
		}
		if scan != nil {
			break
		}
		if time.Since(built) > 10*time.Second {
			return fmt.Errorf("the guard did not see the keyword list within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	buildTime := time.Since(built)

	on, off := &timedModels{chunks: chunks}, &timedModels{chunks: chunks}
	hOn := agentstep.New(app.Runs, on, app.Tools, app.Stream,
		agentstep.Config{WorkerID: "bench-guard-on", Lease: cfg.StepLease, Guard: app.Guard}, app.Log)
	hOff := agentstep.New(app.Runs, off, app.Tools, app.Stream,
		agentstep.Config{WorkerID: "bench-guard-off", Lease: cfg.StepLease}, app.Log)
	e.Progress("figure 15: %d steps of %d deltas with the guard on and off, alternating", 2*(guardWarm+guardSteps), guardDeltas)
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = app.Relay.Run(relayCtx) }()
	var stepOn, stepOff benchkit.Samples
	for i := range guardWarm + guardSteps {
		timed := i >= guardWarm
		on.timed, off.timed = timed, timed
		order := []*agentstep.Handler{hOn, hOff}
		if i%2 == 1 { // neither kind always runs first (after the relay's work of the pair before)
			order[0], order[1] = hOff, hOn
		}
		for k, h := range order {
			s := steps[2*i+k]
			t0 := time.Now()
			if err := h.Handle(ctx, s); err != nil {
				stopRelay()
				return fmt.Errorf("step of run %s: %w", s.RunID, err)
			}
			if d := time.Since(t0); timed && h == hOn {
				stepOn = append(stepOn, d)
			} else if timed {
				stepOff = append(stepOff, d)
			}
		}
	}
	// A turn that does say a keyword must be refused on this path (else the
	// figure would have timed a guard that was not on).
	hit := agentstep.New(app.Runs, &timedModels{chunks: []string{"前文" + kws[0] + "后文"}}, app.Tools, app.Stream,
		agentstep.Config{WorkerID: "bench-guard-hit", Lease: cfg.StepLease, Guard: app.Guard}, app.Log)
	last := steps[len(steps)-1]
	if err := hit.Handle(ctx, last); err != nil {
		stopRelay()
		return fmt.Errorf("step of run %s: %w", last.RunID, err)
	}
	stopRelay()
	<-relayDone
	var status, errType string
	if err := app.Pool.QueryRow(ctx, `SELECT status, coalesce(error_type, '') FROM agent_runs WHERE id = $1`, last.RunID).Scan(&status, &errType); err != nil {
		return err
	}
	var completed int
	if err := app.Pool.QueryRow(ctx, `SELECT count(*) FROM agent_runs WHERE status = 'completed'`).Scan(&completed); err != nil {
		return err
	}

	e.Progress("figure 15: SSE delivery floor (XADD → XREAD BLOCK), %d events", guardFloorN)
	floorPrefix := benchkit.NewPrefix()
	defer e.DropPrefix(floorPrefix)
	floor, err := redisFloor(ctx, e.Redis, floorPrefix+"guardfloor", guardFloorN, 5*time.Millisecond)
	if err != nil {
		return err
	}

	// The matcher alone (Stream.Write per chunk), as the figure measured
	// before: the lower bound of the check.
	st := contentguard.NewMatcher(kws).NewStream()
	var alone benchkit.Samples
	falseHits := 0
	for k := 0; k < 20000; k += 100 {
		t0 := time.Now()
		for j := range 100 {
			if st.Write(chunks[(k+j)%len(chunks)]) >= 0 {
				falseHits++
			}
		}
		alone = append(alone, time.Since(t0)/100)
	}

	// The guard's per-turn work outside the deltas, as the step calls it:
	// Scanner (settings snapshot, matcher, scan state) and CheckOutput of
	// the whole answer (guardDeltas chunks).
	var setup, final benchkit.Samples
	answer := strings.Join(chunks[:guardDeltas], "")
	for range 500 {
		t0 := time.Now()
		if _, err := app.Guard.Scanner(ctx); err != nil {
			return err
		}
		t1 := time.Now()
		if err := app.Guard.CheckOutput(ctx, answer); err != nil {
			return fmt.Errorf("final check of a clean answer: %w", err)
		}
		setup, final = append(setup, t1.Sub(t0)), append(final, time.Since(t1))
	}

	onP50, offP50, f50 := on.samples.P50(), off.samples.P50(), floor.P50()
	check := max(onP50-offP50, 0)
	ratio := benchkit.DurRatio(check, f50)
	blocked := status == "failed" && errType == "content_guard_blocked"
	okRuns := completed == 2*(guardWarm+guardSteps)
	us := func(d time.Duration) string { return fmt.Sprintf("%.2fµs", float64(d.Nanoseconds())/1000) }
	r.Line("guard_check_per_chunk_output_path", us(check),
		fmt.Sprintf("%.4f× of SSE delivery floor p50 %s", ratio, benchkit.Ms(f50)),
		fmt.Sprintf("≤ %.2f×", guardTarget), ratio <= guardTarget && blocked && okRuns && falseHits == 0)
	r.Line("delta_callback_guard_on_p50", us(onP50),
		fmt.Sprintf("%.4f× of the floor (scan + forward); off %s; p99 on %s / off %s", benchkit.DurRatio(onP50, f50), us(offP50),
			us(on.samples.P99()), us(off.samples.P99())), "", false)
	r.Detail("per model turn, outside the deltas: Scanner (settings snapshot, matcher, scan state) p50 %s, CheckOutput of the "+
		"%d-chunk answer p50 %s — %s per chunk amortised", us(setup.P50()), guardDeltas, us(final.P50()),
		us((setup.P50()+final.P50())/guardDeltas))
	mean := func(xs benchkit.Samples) time.Duration {
		var sum time.Duration
		for _, x := range xs {
			sum += x
		}
		return sum / time.Duration(max(len(xs), 1))
	}
	r.Detail("delta callback mean on %s / off %s (with the batcher's inline flushes); step mean on %s / off %s",
		us(mean(on.samples)), us(mean(off.samples)), benchkit.Ms(mean(stepOn)), benchkit.Ms(mean(stepOff)))
	r.Detail("%d timed deltas each way; step p50 on %s / off %s (whole steps, noisy); matcher alone p50 %s per chunk (p99 %s), %d false hits (want 0); "+
		"keyword list seen and its matcher built %s after the settings update; a turn containing a keyword: run %s/%s "+
		"(want failed/content_guard_blocked); %d of %d timed-path runs completed",
		len(on.samples), benchkit.Ms(stepOn.P50()), benchkit.Ms(stepOff.P50()), us(alone.P50()), us(alone.P99()), falseHits,
		buildTime.Round(time.Millisecond), status, errType, completed, 2*(guardWarm+guardSteps))
	return nil
}

// timedModels is figure 15's model registry: every spec resolves to a
// model streaming guardDeltas chunks and timing each delta callback (when
// timed). Steps run one at a time, so samples needs no lock.
type timedModels struct {
	chunks  []string
	next    int
	timed   bool
	samples benchkit.Samples
}

func (m *timedModels) ChatModel(string) (llm.ChatModel, string, error) { return m, "timed", nil }

func (m *timedModels) Stream(_ context.Context, _ llm.Request, onDelta func(llm.Delta) error) (llm.Response, error) {
	var all strings.Builder
	n := min(guardDeltas, len(m.chunks))
	for range n {
		c := m.chunks[m.next%len(m.chunks)]
		m.next++
		all.WriteString(c)
		t0 := time.Now()
		err := onDelta(llm.Delta{Content: c})
		if m.timed {
			m.samples = append(m.samples, time.Since(t0))
		}
		if err != nil {
			return llm.Response{}, err
		}
	}
	return llm.Response{Content: all.String(), FinishReason: "stop",
		Usage: llm.Usage{InputTokens: 1, OutputTokens: int64(n), TotalTokens: int64(n) + 1, Reported: true}}, nil
}

// guardCorpus makes the keyword list (none of which occurs in a chunk:
// Chinese keywords end in 禁, which no chunk holds; English ones in "qx",
// and chunks never have two letters in a row) and 1,000 chunks.
func guardCorpus(rng *rand.Rand) (kws, chunks []string) {
	han := []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处府")
	latin := "abcdefghijklmnopqrstuvwxyz"
	kws = make([]string, guardWords)
	for i := range kws {
		var b strings.Builder
		if i%2 == 0 {
			for range 2 + rng.IntN(3) {
				b.WriteRune(han[rng.IntN(len(han))])
			}
			b.WriteString("禁")
		} else {
			for range 5 + rng.IntN(6) {
				b.WriteByte(latin[rng.IntN(len(latin))])
			}
			b.WriteString("qx")
		}
		kws[i] = b.String()
	}
	chunks = make([]string, 1000)
	for i := range chunks {
		var b strings.Builder
		for j := range guardChunkSz {
			if j%3 == 2 {
				b.WriteByte(latin[rng.IntN(len(latin))])
			} else {
				b.WriteRune(han[rng.IntN(len(han))])
			}
		}
		chunks[i] = b.String()
	}
	return kws, chunks
}
