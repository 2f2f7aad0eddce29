package runstream

import "time"

// Defaults applied by Config.withDefaults.
const (
	DefaultPrefix      = "yuxi:"
	DefaultStreamTTL   = 2 * time.Hour
	DefaultEndTail     = 5 * time.Minute
	DefaultMaxLen      = 20000
	DefaultReadBlock   = 10 * time.Second
	DefaultSubBuffer   = 1024
	DefaultReadCount   = 200
	cancelTTL          = 30 * time.Minute
	queueStreamMaxLen  = 100
	wakeStreamMaxLen   = 16
	wakeStreamTTL      = time.Hour
	defaultHeartbeat   = 15 * time.Second
	defaultMaxDuration = 30 * time.Minute
)

// Config names the keys and sizes of run streams. The zero value is usable:
// every zero field takes its default. Producers and consumers of the same
// streams must use the same Prefix.
type Config struct {
	// Prefix starts every key this package touches (default "yuxi:").
	Prefix string
	// StreamTTL is the expiry of a run stream, refreshed on every append
	// (default 2h): it bounds streams of runs that never end. Queue streams
	// and once-markers share it.
	StreamTTL time.Duration
	// EndTail is how long a run stream lives after its `end` event (default
	// 5 min): long enough for clients that drop and resume with
	// Last-Event-ID; a client that comes later gets the synthetic end from
	// ServeRun and reads the final messages from Postgres (the run's result,
	// the thread history). The once-markers keep StreamTTL — they are a few
	// bytes — so a late duplicate end (a redelivered run.finished) still
	// appends nothing after the stream is gone.
	EndTail time.Duration
	// MaxLen is the approximate MAXLEN of a run stream (default 20000).
	MaxLen int64
	// ReadBlock is how long the Hub's shared XREAD blocks before it is
	// re-issued (default 10s). It bounds the cost of an idle process: one
	// command per ReadBlock, however many clients it serves.
	ReadBlock time.Duration
	// SubscriptionBuffer is the number of live entries a subscription may
	// hold before its consumer is declared slow and the subscription is
	// closed with ErrSlowConsumer (default 1024).
	SubscriptionBuffer int
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.StreamTTL <= 0 {
		c.StreamTTL = DefaultStreamTTL
	}
	if c.EndTail <= 0 {
		c.EndTail = DefaultEndTail
	}
	if c.EndTail > c.StreamTTL {
		c.EndTail = c.StreamTTL
	}
	if c.MaxLen <= 0 {
		c.MaxLen = DefaultMaxLen
	}
	if c.ReadBlock <= 0 {
		c.ReadBlock = DefaultReadBlock
	}
	if c.SubscriptionBuffer <= 0 {
		c.SubscriptionBuffer = DefaultSubBuffer
	}
	return c
}

// RunKey is the stream of run runID: {prefix}run:events:{run_id}.
func (c Config) RunKey(runID string) string {
	return c.withDefaults().Prefix + "run:events:" + runID
}

// QueueKey is the wake-up stream of thread threadID's request queue:
// {prefix}queue:events:{thread_id}.
func (c Config) QueueKey(threadID string) string {
	return c.withDefaults().Prefix + "queue:events:" + threadID
}

// KBKey is knowledge base kbID's stream of file status changes:
// {prefix}kb:events:{kb_id}.
func (c Config) KBKey(kbID string) string {
	return c.withDefaults().Prefix + "kb:events:" + kbID
}

// CancelKey is the cancel flag of run runID: {prefix}run:cancel:{run_id}.
func (c Config) CancelKey(runID string) string {
	return c.withDefaults().Prefix + "run:cancel:" + runID
}

// cancelChannel is the pub/sub channel on which SignalCancel announces a
// cancel of runID, so watchers need not poll.
func (c Config) cancelChannel(runID string) string {
	return c.withDefaults().Prefix + "run:cancel:ch:" + runID
}

// onceKey is the hash of AppendOnce markers of runID (field = once key,
// value = the stream id that was appended).
func (c Config) onceKey(runID string) string {
	return c.withDefaults().Prefix + "run:once:" + runID
}
