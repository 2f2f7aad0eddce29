// Package runstream carries run events from the functions that produce them to
// the browsers that watch them, through Redis Streams.
//
// Producer side (agent-step, tool-invoke, and shared/run, which writes every
// run's closing events): Writer appends enveloped events to
// {prefix}run:events:{run_id} (XADD with an approximate MAXLEN and a TTL
// refreshed on every append), appends the single `end` event at most once
// with AppendOnce (after which the stream lives only Config.EndTail; later
// clients read the final messages from Postgres), batches model token chunks into
// `messages` events with Batcher, signals and watches cancellation
// ({prefix}run:cancel:{run_id} plus a per-run pub/sub channel), and wakes
// request-SSE clients through {prefix}queue:events:{thread_id}.
//
// Consumer side (the intake function that serves SSE): one Hub per process runs
// ONE blocking XREAD over every stream its clients follow; Subscription gives a
// client every entry after its cursor, in order, exactly once. ServeRun serves
// GET /api/agent/runs/{run_id}/events (contracts §3.7); ServeStream and
// EventWriter are the heartbeat/flush machinery the request SSE (§3.8) reuses.
// An idle client costs no Redis command beyond the shared blocking read and no
// database query at all: the caller reads the run once, when it authorises the
// request, and passes what it read in RunStreamOptions.
//
// Imported by: shared/run, functions that produce run events or serve SSE,
// shared/bootstrap and the local runner. May import: the standard library and go-redis. It never imports
// another shared domain package or Postgres.
package runstream
