package main

import (
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// env is what every figure shares: benchkit's environment (the database
// server's admin connection, Redis, the bench databases and prefixes), the
// binaries built at start and the figures' inputs.
type env struct {
	*benchkit.Env
	bins map[string]string // function name (and "hello") → executable

	selected    []string // the figures this run reports
	root        string   // the module's directory
	datasetsDir string   // YUXI_DATASETS_DIR: retrieval test sets (figure 5)
	// kbEnv is added to the knowledge fixture's environment (figures 5, 6):
	// YUXI_BENCH_EMBEDDING_MODEL (model id), _BASE_URL and _API_KEY of an
	// OpenAI-compatible /v1/embeddings provider; empty: the builtin embedder.
	kbEnv map[string]string
	kn    *knowledge // the knowledge-base fixture of figures 5 and 6, opened on first use
}

// platformEnv is benchkit's platform environment on db and prefix with an
// event sink that is never reached (K_SINK; the intake process gets a sink
// of its own, the soak deletes it for the local runner's in-process bus).
func (e *env) platformEnv(db benchkit.DB, prefix string) map[string]string {
	penv := e.PlatformEnv(db, prefix)
	penv["K_SINK"] = "http://127.0.0.1:9/"
	return penv
}
