// Package bootstrap turns configuration into a process's clients. Load reads
// the environment (only mains call it, with their getenv); OpenCore connects
// what every function uses (the migrated Postgres pool, Redis and the
// run-stream writer, the outbox and its relay, the model providers). The
// packages under it open the rest, each for the functions that use it, so
// that a function links and opens only what its handler needs: chat (tools,
// runs, agents, threads, queue, auth), knowledge (the knowledge-base engines)
// and parser (the document parser). YUXI_RELAY chooses how the outbox
// publishes (relay.go): over HTTP to K_SINK, or to EventBridge, SQS or
// Pub/Sub through shared/cloudbus. Main (main.go) is the whole of a
// function's main: Load, OpenCore, the function's own wiring, the relay
// and faas.Serve until SIGINT/SIGTERM.
//
// Imported by: function mains, infra/local, tests and benchmarks.
// May import: shared/postgres, shared/outbox, shared/runstream, shared/faas,
// shared/llm, shared/modelprovider, shared/netguard, shared/secret, shared/clientaddr, shared/cloudbus, shared/telemetry, shared/logring, events, pgx,
// go-redis, the CloudEvents SDK, the AWS SDK, the Google Cloud Pub/Sub client and the standard
// library (never a domain or engine package: those belong to the openers
// under it; tests/manifests/links_test.go fails when agent-step links one).
package bootstrap
