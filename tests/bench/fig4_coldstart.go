package main

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 4: exec → ready of every function binary, against a hello-world.
const (
	coldStarts    = 15
	coldP50Target = 50 * time.Millisecond
	coldRSSTarget = 40 << 20
)

type coldResult struct {
	lat    benchkit.Samples
	maxRSS int64
}

func figColdStart(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[4] cold start of each function binary, exec → ready line",
		fmt.Sprintf("each binary started %d times (interleaved), timed from just before exec to reading \"<function>: ready on <addr>\" on its stderr, "+
			"VmRSS read at that moment, then SIGKILL; the functions connect to a migrated bench database and Redis before they are ready; "+
			"floor: a hello-world net/http binary built by the bench, measured the same way", coldStarts))
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	penv := e.platformEnv(db, prefix)
	penv["PORT"] = "0"

	names := append([]string{"hello"}, functionNames...)
	// Two untimed starts each: the first stores the intake's generated
	// secrets and brings every binary into the page cache; the second runs
	// with GODEBUG=inittrace=1 to see how long package initialisation takes.
	inits := map[string]initTrace{}
	for _, n := range names {
		p, err := startProc(e.bins[n], penv, 30*time.Second, nil)
		if err != nil {
			return err
		}
		p.kill()
		tenv := maps.Clone(penv)
		tenv["GODEBUG"] = "inittrace=1"
		var it initTrace
		if p, err = startProc(e.bins[n], tenv, 30*time.Second, it.line); err != nil {
			return err
		}
		p.kill()
		inits[n] = it
	}
	e.Progress("figure 4: %d starts of %d binaries", coldStarts, len(names))
	res := map[string]*coldResult{}
	for _, n := range names {
		res[n] = &coldResult{}
	}
	for range coldStarts {
		for _, n := range names { // interleaved: noise hits every binary alike
			if err := ctx.Err(); err != nil {
				return err
			}
			p, err := startProc(e.bins[n], penv, 10*time.Second, nil)
			if err != nil {
				return err
			}
			p.kill()
			res[n].lat = append(res[n].lat, p.Ready)
			res[n].maxRSS = max(res[n].maxRSS, p.RSS)
		}
	}

	// The database part of bootstrap.OpenCore, in-process: connect, take the
	// migration lock, find every migration applied.
	var dbPart benchkit.Samples
	for range coldStarts {
		t0 := time.Now()
		pool, err := postgres.Open(ctx, db.URL, 0)
		if err != nil {
			return err
		}
		err = postgres.Migrate(ctx, pool)
		pool.Close()
		if err != nil {
			return err
		}
		dbPart = append(dbPart, time.Since(t0))
	}

	fl := res["hello"]
	f50 := fl.lat.P50()
	r.Line("cold_start_floor_p50", benchkit.Ms(f50), "the floor: hello-world, rss max "+benchkit.MB(fl.maxRSS), "", false)
	r.Detail("for reading the functions' figures: bootstrap's database part alone (postgres.Open + Migrate, in-process) p50 %s; "+
		"package initialisation below is one GODEBUG=inittrace=1 start", benchkit.Ms(dbPart.P50()))
	for _, n := range functionNames {
		c := res[n]
		p50 := c.lat.P50()
		r.Line("cold_start_"+n+"_p50", benchkit.Ms(p50), benchkit.X(benchkit.DurRatio(p50, f50))+" vs floor "+benchkit.Ms(f50), "≤ "+benchkit.Ms(coldP50Target), p50 <= coldP50Target)
		r.Line("rss_at_ready_"+n+"_max", benchkit.MB(c.maxRSS), benchkit.X(benchkit.Ratio(float64(c.maxRSS), float64(fl.maxRSS)))+" vs floor "+benchkit.MB(fl.maxRSS),
			"≤ "+benchkit.MB(coldRSSTarget), c.maxRSS <= coldRSSTarget)
		it := inits[n]
		r.Detail("%s: min %s, p90 %s, max %s over %d starts; package init %s (%d packages, slowest %s %s)", n,
			benchkit.Ms(c.lat.Pct(0.0001)), benchkit.Ms(c.lat.Pct(90)), benchkit.Ms(c.lat.Pct(100)), len(c.lat), benchkit.Ms(it.end), it.packages, it.slowest, benchkit.Ms(it.slowestClock))
	}
	return nil
}

// initTrace sums a GODEBUG=inittrace=1 trace: lines such as
// "init net/http @1.234 ms, 0.456 ms clock, 12345 bytes, 67 allocs".
type initTrace struct {
	end          time.Duration // when the last package init ended, since the runtime started
	packages     int
	slowest      string
	slowestClock time.Duration
}

func (t *initTrace) line(s string) {
	rest, ok := strings.CutPrefix(s, "init ")
	if !ok {
		return
	}
	var pkg string
	var at, clock float64
	if _, err := fmt.Sscanf(rest, "%s @%f ms, %f ms clock", &pkg, &at, &clock); err != nil {
		return
	}
	t.packages++
	t.end = max(t.end, time.Duration((at+clock)*float64(time.Millisecond)))
	if c := time.Duration(clock * float64(time.Millisecond)); c > t.slowestClock {
		t.slowest, t.slowestClock = pkg, c
	}
}
