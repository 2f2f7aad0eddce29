// Package benchkit is the harness the bench programs share: the services a
// figure runs against (the PostgreSQL admin connection and Redis, from
// YUXI_BENCH_DATABASE_URL and YUXI_BENCH_REDIS_URL), a freshly created and
// migrated database and a Redis key prefix of its own per figure (Scratch;
// dropped afterwards), the platform environment on them, the bare INSERT+COMMIT
// floor the platform is compared with, latency samples and their
// percentiles, and the report every figure prints into (`name: value (ratio
// vs floor)` lines, target verdicts and the summary) with the loop that runs
// the figures -only selects (Figure, RunFigures). Both programs print
// through it, so their figures share one format.
//
// Imported by: tests/bench, and the peers module (tests/bench/peers, a
// module of its own, which tests/manifests cannot list).
// May import: shared/postgres, pgx, go-redis.
package benchkit
