// Command bench is `make bench`: seven figures of the platform's overhead,
// knowledge-base retrieval quality, query latency and ingestion, each
// printed as `name: value (ratio vs floor)` where the floor is measured
// in the same run, on the same machine and the same services, so that ratios
// stay meaningful on noisy machines where absolute times do not. See
// README.md for what each figure measures and how to read it.
//
// It needs PostgreSQL (YUXI_BENCH_DATABASE_URL, default the local trust-auth
// server) and Redis (YUXI_BENCH_REDIS_URL, default local), creates a database
// and a Redis key prefix of its own per figure and removes them afterwards.
// It exits 0 when every figure ran, whether or not its target was met (the
// bench is a report), and non-zero when it could not run.
//
// Imports function handler packages (as tests/ may), shared/* and
// tests/bench/benchkit (the harness it shares with tests/bench/peers).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
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

// figures in report order.
var figures = []benchkit.Figure[*env]{
	{ID: "1", Name: "figure 1 (agent-step overhead)", Run: figStep},
	{ID: "2", Name: "figure 2 (intake under concurrency)", Run: figIntake},
	{ID: "3", Name: "figure 3 (SSE delivery and idle cost)", Run: figSSE},
	{ID: "4", Name: "figure 4 (cold start)", Run: figColdStart},
	{ID: "5", Name: "figure 5 (retrieval quality)", Run: figQuality},
	{ID: "6", Name: "figure 6 (query latency)", Run: figQuery},
	{ID: "7", Name: "figure 7 (ingestion)", Run: figIngest},
	{ID: "10", Name: "figure 10 (sandbox provisioner)", Run: figSandbox},
	{ID: "11", Name: "figure 11 (authentication cost)", Run: figAuth},
	{ID: "12", Name: "figure 12 (external clients: /v1 stream, yuxi kb upload)", Run: figExternal},
	{ID: "13", Name: "figure 13 (MCP call through tool-invoke)", Run: figMCP},
	{ID: "14", Name: "figure 14 (tracing and cloud relays)", Run: figCloud},
	{ID: "15", Name: "figure 15 (content guard keyword check)", Run: figGuard},
	{ID: "16", Name: "figure 16 (dashboard stats over 1M messages)", Run: figDashboard},
	{ID: "17", Name: "figure 17 (tool assembly and skill visibility per step)", Run: figTools},
	{ID: "18", Name: "figure 18 (evaluation runs and scheduler ticks)", Run: figEval},
	{ID: "19", Name: "figure 19 (knowledge graph build and query)", Run: figGraph},
}

func run(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "1,2,3,4,5,6,7,10,11,12,13,14,15,16,17,18,19", "comma-separated figures to run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench process to this file")
	var soak soakConfig
	fs.DurationVar(&soak.Duration, "soak", 0, "instead of the figures, soak the platform this long (make soak: 10m) and print the slopes of what could grow")
	fs.Float64Var(&soak.Rate, "soak-rate", 20, "soak: runs per second")
	fs.IntVar(&soak.SSE, "soak-sse", 200, "soak: concurrent SSE clients")
	fs.DurationVar(&soak.Window, "soak-window", time.Minute, "soak: every retention window (outbox, kept keys, stream TTL; the stream tail is a quarter)")
	fs.DurationVar(&soak.Sample, "soak-sample", 5*time.Second, "soak: sampling interval")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if soak.Duration > 0 && (soak.Rate <= 0 || soak.SSE <= 0 || soak.Window <= 0 || soak.Sample <= 0) {
		fmt.Fprintln(stderr, "bench: -soak-rate, -soak-sse, -soak-window and -soak-sample must be positive")
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	selected := strings.Split(*only, ",")
	budget := 15*time.Minute + soak.Duration
	if slices.Contains(selected, "19") {
		budget += 15 * time.Minute // figure 19 builds the 100k KB (and its HNSW graph) unless figure 6 did
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	adminURL, redisURL := benchkit.ServiceURLs(getenv)
	e, closeEnv, err := openEnv(ctx, adminURL, redisURL, stderr, soak.Duration == 0)
	if err != nil {
		fmt.Fprintln(stderr, "bench cannot run:", err)
		return 2
	}
	defer closeEnv()
	if soak.Duration > 0 {
		fmt.Fprintf(stdout, "yuxi soak — %s\n", e.Describe(ctx))
		if err := runSoak(ctx, e, soak, stdout); err != nil {
			fmt.Fprintln(stdout, "soak failed:", err)
			return 1
		}
		return 0
	}
	e.datasetsDir = getenv("YUXI_DATASETS_DIR")
	if m := getenv("YUXI_BENCH_EMBEDDING_MODEL"); m != "" {
		e.kbEnv = map[string]string{"YUXI_DEFAULT_EMBEDDING_MODEL": "bench-embed:" + m,
			"YUXI_PROVIDER_BENCH_EMBED_BASE_URL": getenv("YUXI_BENCH_EMBEDDING_BASE_URL"),
			"YUXI_PROVIDER_BENCH_EMBED_API_KEY":  getenv("YUXI_BENCH_EMBEDDING_API_KEY")}
	}
	e.selected = selected

	rep := benchkit.NewReport(stdout)
	fmt.Fprintf(stdout, "yuxi bench — %s\n", e.Describe(ctx))
	fmt.Fprintln(stdout, "each result: name: value (ratio vs a floor measured in this run); absolute times are for orientation only")
	start := time.Now()
	benchkit.RunFigures(ctx, figures, selected, e, rep)
	rep.Summary()
	fmt.Fprintf(stderr, "bench: done in %s\n", time.Since(start).Round(time.Second))
	if len(rep.Failed()) > 0 {
		return 1
	}
	return 0
}

// openEnv connects to the services and (with build) builds the binaries.
func openEnv(ctx context.Context, adminURL, redisURL string, log io.Writer, build bool) (*env, func(), error) {
	kit, err := benchkit.Open(ctx, "bench", adminURL, redisURL, log)
	if err != nil {
		return nil, nil, err
	}
	e := &env{Env: kit}
	dir, err := os.MkdirTemp("", "yuxi-bench-")
	if err != nil {
		kit.Close()
		return nil, nil, err
	}
	closeAll := func() {
		e.closeKnowledge()
		kit.Close()
		_ = os.RemoveAll(dir)
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	e.root = root
	if !build {
		return e, closeAll, nil
	}
	e.Progress("building %s, the local runner and the hello-world floor", strings.Join(functionNames, ", "))
	if e.bins, err = buildBinaries(ctx, root, dir); err != nil {
		closeAll()
		return nil, nil, err
	}
	return e, closeAll, nil
}

// moduleRoot is the directory of the go.mod governing the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run the bench from inside the module (go run ./tests/bench)")
	}
	return filepath.Dir(mod), nil
}
