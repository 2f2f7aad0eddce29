// Command peers is the second half of `make bench`: figures 8 and 9 put the
// platform's durable step and its per-thread request queue side by side
// with what a user would pick instead — DBOS Transact (durable workflows
// checkpointed in Postgres) and River (a Postgres job queue) — on the same
// PostgreSQL database, in the same run, against the same bare INSERT+COMMIT
// floor as figure 1. See ../README.md, figures 8 and 9.
//
// It is a module of its own so that the peers stay out of the product's
// go.mod: it requires the product through a replace directive (../../..)
// and is run from this directory (`make bench` does `cd tests/bench/peers
// && go run .`). The root module's `./...` does not descend into it.
//
// Imports function handler packages (as tests/ may), shared/*, events,
// tests/bench/benchkit (the harness it shares with tests/bench) and the
// peers (dbos-transact-golang, river).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Getenv, os.Args[1:], os.Stdout, os.Stderr))
}

// figures in report order; the numbers continue those of tests/bench.
var figures = []benchkit.Figure[*env]{
	{ID: "8", Name: "figure 8 (durable step vs DBOS Transact)", Run: figDBOS},
	{ID: "9", Name: "figure 9 (queue dispatch vs River)", Run: figRiver},
}

// sizes are the sample counts, from the environment (YUXI_BENCH_PEERS_*)
// so that a slow machine can shorten the run.
type sizes struct {
	workflows int           // figure 8: timed 10-step workflows of each kind
	counted   int           // figure 8: workflows of each kind whose commits are counted
	idle      int           // figure 9: isolated requests (jobs) of each kind
	idleGap   time.Duration // figure 9: pause between isolated requests
	rate      int           // figure 9: requests (jobs) per second under load
	seconds   int           // figure 9: seconds of load for each kind
	threads   int           // figure 9: threads the load is spread over
}

func loadSizes(getenv func(string) string) (sizes, error) {
	s := sizes{workflows: 100, counted: 20, idle: 100, idleGap: 120 * time.Millisecond, rate: 500, seconds: 6, threads: 1000}
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"YUXI_BENCH_PEERS_WORKFLOWS", &s.workflows}, {"YUXI_BENCH_PEERS_COUNTED", &s.counted},
		{"YUXI_BENCH_PEERS_IDLE", &s.idle}, {"YUXI_BENCH_PEERS_RATE", &s.rate},
		{"YUXI_BENCH_PEERS_SECONDS", &s.seconds}, {"YUXI_BENCH_PEERS_THREADS", &s.threads},
	} {
		if raw := getenv(v.name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 {
				return s, fmt.Errorf("%s=%q: want a positive integer", v.name, raw)
			}
			*v.dst = n
		}
	}
	if raw := getenv("YUXI_BENCH_PEERS_IDLE_GAP"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return s, fmt.Errorf("YUXI_BENCH_PEERS_IDLE_GAP=%q: want a duration such as 120ms", raw)
		}
		s.idleGap = d
	}
	return s, nil
}

func run(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "8,9", "comma-separated figures to run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sz, err := loadSizes(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bench peers cannot run:", err)
		return 2
	}
	selected := strings.Split(*only, ",")
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()

	adminURL, redisURL := benchkit.ServiceURLs(getenv)
	kit, err := benchkit.Open(ctx, "bench peers", adminURL, redisURL, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "bench peers cannot run:", err)
		return 2
	}
	defer kit.Close()
	e := &env{Env: kit, sizes: sz}

	rep := benchkit.NewReport(stdout)
	fmt.Fprintf(stdout, "yuxi bench, peers — %s\n", e.Describe(ctx))
	fmt.Fprintln(stdout, "each result: name: value (ratio vs a peer or a floor measured in this run); absolute times are for orientation only")
	start := time.Now()
	benchkit.RunFigures(ctx, figures, selected, e, rep)
	rep.Summary()
	fmt.Fprintf(stderr, "bench peers: done in %s\n", time.Since(start).Round(time.Second))
	if len(rep.Failed()) > 0 {
		return 1
	}
	return 0
}
