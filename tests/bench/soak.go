package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Soak (`make soak`, `go run ./tests/bench -soak 10m`): the whole platform
// (the local runner, in this process, with figure 1's instant model) under a
// steady rate of runs, each submitted on a new thread and watched to its end
// by an SSE client, for a fixed time. Every few seconds it samples what could
// grow — the process's RSS and goroutines (platform and clients together),
// the database's size, the outbox's rows and kept keys, Redis's used_memory
// (the whole server, shared with anything else using it) and the bytes of
// this soak's own keys — and prints each one's slope per 1,000 runs, over the
// whole soak and after the retention windows (set short here so that they
// show): the retained things must be flat there.
type soakConfig struct {
	Duration time.Duration // total time under load
	Rate     float64       // runs per second
	SSE      int           // concurrent SSE clients (= runs in flight at most)
	// Window is every retention window of the soak: YUXI_OUTBOX_RETENTION,
	// YUXI_OUTBOX_KEY_RETENTION and YUXI_STREAM_TTL; YUXI_STREAM_TAIL is a
	// quarter of it.
	Window time.Duration
	Sample time.Duration
}

// soakSample is one sample of everything that could grow.
type soakSample struct {
	At          time.Duration
	Runs        int64
	RSS         int64
	Goroutines  int64
	DBSize      int64
	OutboxRows  int64
	OutboxKeys  int64
	RedisUsed   int64
	PrefixBytes int64
	PrefixKeys  int64
}

func runSoak(ctx context.Context, e *env, cfg soakConfig, out io.Writer) error {
	fmt.Fprintf(out, "soak: %s at %.0f runs/s with %d SSE clients; retention windows %s (outbox, kept keys, stream TTL), stream tail %s\n",
		cfg.Duration, cfg.Rate, cfg.SSE, cfg.Window, cfg.Window/4)
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	blobDir, err := os.MkdirTemp("", "yuxi-soak-objects-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(blobDir)

	penv := e.platformEnv(db, prefix)
	delete(penv, "K_SINK") // the local runner's in-process bus
	w := cfg.Window.String()
	for k, v := range map[string]string{
		"YUXI_OUTBOX_RETENTION": w, "YUXI_OUTBOX_KEY_RETENTION": w, "YUXI_STREAM_TTL": w,
		"YUXI_STREAM_TAIL": (cfg.Window / 4).String(), "YUXI_SWEEP_INTERVAL": "2s",
		"YUXI_BLOB_URI": "file://" + blobDir, "YUXI_DB_MAX_CONNS": "40", "LOG_LEVEL": "error",
	} {
		penv[k] = v
	}
	pcfg, err := bootstrap.Load(func(k string) string { return penv[k] }, benchkit.EnvList(penv), "0")
	if err != nil {
		return err
	}
	pctx, stopPlatform := context.WithCancel(ctx)
	p, err := local.New(pctx, pcfg, local.WithModels(instantModels{}))
	if err != nil {
		stopPlatform()
		return err
	}
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx, "127.0.0.1:0", func(a net.Addr) { ready <- a }) }()
	defer func() { stopPlatform(); <-done }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		return fmt.Errorf("platform did not start: %w", err)
	}
	a := newAPI("http://"+addr.String(), cfg.SSE+16)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := a.call(ctx, "POST", "/api/auth/initialize", map[string]string{"uid": "bench", "password": "bench-password"}, &tok); err != nil {
		return err
	}
	a.token = tok.AccessToken
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return err
	}
	defer pool.Close()

	var (
		runs, ends, failures, skipped atomic.Int64
		firstErr                      error
		errMu                         sync.Mutex
	)
	fail := func(err error) {
		failures.Add(1)
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.SSE, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	tokens := make(chan struct{}, cfg.SSE)
	var workers sync.WaitGroup
	for range cfg.SSE {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-tokens:
				}
				// Each run on a new thread, watched to its end.
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				th, err := a.thread(rctx)
				var runID string
				if err == nil {
					runID, err = a.submit(rctx, th)
				}
				if err != nil {
					cancel()
					fail(err)
					continue
				}
				n := 0
				connected := make(chan error, 1)
				err = a.readStream(rctx, hc, runID, connected, func(ev sseEvent) {
					if ev.Event == "end" {
						n++
					}
				})
				cancel()
				if err == nil && n != 1 {
					err = fmt.Errorf("run %s: %d end events", runID, n)
				}
				if err != nil {
					fail(err)
					continue
				}
				runs.Add(1)
				ends.Add(int64(n))
			}
		}()
	}
	// The pacer: one token per run at the rate; a token no worker is free
	// to take is dropped and counted (the platform fell behind).
	go func() {
		interval := time.Duration(float64(time.Second) / cfg.Rate)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-t.C:
				select {
				case tokens <- struct{}{}:
				default:
					skipped.Add(1)
				}
			}
		}
	}()

	start := time.Now()
	var samples []soakSample
	take := func() error {
		s := soakSample{At: time.Since(start), Runs: runs.Load(), Goroutines: int64(runtime.NumGoroutine())}
		s.RSS, _ = readRSS(os.Getpid())
		if err := e.Admin.QueryRow(ctx, `SELECT pg_database_size($1)`, db.Name).Scan(&s.DBSize); err != nil {
			return err
		}
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox), (SELECT count(*) FROM outbox_keys)`).Scan(&s.OutboxRows, &s.OutboxKeys); err != nil {
			return err
		}
		info, err := e.Redis.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				s.RedisUsed, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		s.PrefixKeys, s.PrefixBytes, err = e.prefixMemory(ctx, prefix)
		if err != nil {
			return err
		}
		samples = append(samples, s)
		e.Progress("soak %s: %d runs, RSS %s, %d goroutines, db %s, outbox %d rows / %d keys, redis %s (soak keys %d, %s)",
			s.At.Round(time.Second), s.Runs, benchkit.MB(s.RSS), s.Goroutines, benchkit.MB(s.DBSize), s.OutboxRows, s.OutboxKeys, benchkit.MB(s.RedisUsed), s.PrefixKeys, benchkit.MB(s.PrefixBytes))
		return nil
	}
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	if err := take(); err != nil {
		return err
	}
sampling:
	for {
		select {
		case <-loadCtx.Done():
			break sampling
		case <-tick.C:
			if loadCtx.Err() != nil {
				break sampling // the load ended with this tick: clients are leaving
			}
			if err := take(); err != nil {
				return err
			}
		}
	}
	workers.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	last := samples[len(samples)-1]
	elapsed := last.At.Seconds()
	fmt.Fprintf(out, "soak: %d runs in %s (%.1f runs/s), every stream exactly one end: %d ends; %d runs failed, %d ticks dropped (all clients busy)\n",
		runs.Load(), last.At.Round(time.Second), float64(last.Runs)/elapsed, ends.Load(), failures.Load(), skipped.Load())
	if firstErr != nil {
		fmt.Fprintf(out, "soak: first failure: %v\n", firstErr)
	}
	// Flat after the windows: every window has passed once, plus two sweeps.
	settle := cfg.Window + 4*time.Second
	fmt.Fprintf(out, "soak: slopes per 1,000 runs (least squares over %d samples; \"after\" = samples after %s, when every retention window has passed)\n",
		len(samples), settle)
	fmt.Fprintf(out, "  %-26s %14s %14s %16s %16s\n", "metric", "start", "end", "slope (all)", "slope (after)")
	metrics := []struct {
		name  string
		get   func(soakSample) int64
		bytes bool
	}{
		{"RSS", func(s soakSample) int64 { return s.RSS }, true},
		{"goroutines", func(s soakSample) int64 { return s.Goroutines }, false},
		{"postgres database size", func(s soakSample) int64 { return s.DBSize }, true},
		{"outbox rows", func(s soakSample) int64 { return s.OutboxRows }, false},
		{"outbox kept keys", func(s soakSample) int64 { return s.OutboxKeys }, false},
		{"redis used_memory (server)", func(s soakSample) int64 { return s.RedisUsed }, true},
		{"redis soak keys' memory", func(s soakSample) int64 { return s.PrefixBytes }, true},
		{"redis soak keys", func(s soakSample) int64 { return s.PrefixKeys }, false},
	}
	var after []soakSample
	for _, s := range samples {
		if s.At >= settle {
			after = append(after, s)
		}
	}
	for _, m := range metrics {
		val, slope := func(v int64) string { return strconv.FormatInt(v, 10) }, countUnit
		if m.bytes {
			val, slope = benchkit.MB, bytesUnit
		}
		aft := "n/a"
		if len(after) >= 3 {
			aft = slope(slopePer1000(after, m.get))
		}
		fmt.Fprintf(out, "  %-26s %14s %14s %16s %16s\n", m.name, val(m.get(samples[0])), val(m.get(last)), slope(slopePer1000(samples, m.get)), aft)
	}
	if failures.Load() > 0 {
		return fmt.Errorf("%d runs failed, first: %w", failures.Load(), firstErr)
	}
	if runs.Load() == 0 {
		return errors.New("no run completed")
	}
	return nil
}

// prefixMemory counts the keys under prefix and sums their MEMORY USAGE.
func (e *env) prefixMemory(ctx context.Context, prefix string) (keys, bytes int64, err error) {
	iter := e.Redis.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		pipe := e.Redis.Pipeline()
		cmds := make([]interface{ Val() int64 }, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.MemoryUsage(ctx, k)
		}
		_, _ = pipe.Exec(ctx) // a key expired between SCAN and MEMORY USAGE answers nil
		for _, c := range cmds {
			bytes += c.Val()
		}
		keys += int64(len(batch))
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, 0, err
	}
	return keys, bytes, flush()
}

// slopePer1000 is the least-squares slope of get against completed runs,
// per 1,000 runs.
func slopePer1000(ss []soakSample, get func(soakSample) int64) float64 {
	n := float64(len(ss))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := float64(s.Runs), float64(get(s))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den * 1000
}

func bytesUnit(v float64) string {
	switch a := abs(v); {
	case a >= 1<<20:
		return fmt.Sprintf("%+.2fMB", v/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%+.1fKB", v/(1<<10))
	default:
		return fmt.Sprintf("%+.0fB", v)
	}
}

func countUnit(v float64) string { return fmt.Sprintf("%+.1f", v) }

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
