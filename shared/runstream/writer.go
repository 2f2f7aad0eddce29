package runstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SSE event types written to run streams (contracts §3.7).
const (
	EventMetadata  = "metadata"
	EventMessages  = "messages"
	EventCustom    = "custom"
	EventInterrupt = "interrupt"
	EventError     = "error"
	EventEnd       = "end"
)

// Stream entry field names.
const (
	fieldEventType = "event_type"
	fieldPayload   = "payload"
	fieldTS        = "ts"
)

// SchemaVersion is the envelope schema_version.
const SchemaVersion = 1

// createdAtLayout is RFC 3339 in UTC with milliseconds.
const createdAtLayout = "2006-01-02T15:04:05.000Z"

// Envelope is the JSON stored in the payload field of a run stream entry and
// sent verbatim as the SSE data of verbose streams.
type Envelope struct {
	SchemaVersion int             `json:"schema_version"`
	RunID         string          `json:"run_id"`
	ThreadID      string          `json:"thread_id"`
	Event         string          `json:"event"`
	Payload       json.RawMessage `json:"payload"`
	CreatedAt     string          `json:"created_at"`
}

// wireEnvelope encodes an empty thread id as null, as the original does.
type wireEnvelope struct {
	SchemaVersion int             `json:"schema_version"`
	RunID         string          `json:"run_id"`
	ThreadID      *string         `json:"thread_id"`
	Event         string          `json:"event"`
	Payload       json.RawMessage `json:"payload"`
	CreatedAt     string          `json:"created_at"`
}

// BuildEnvelope encodes the envelope of one event. A nil payload becomes {}.
func BuildEnvelope(runID, threadID, event string, payload any, at time.Time) ([]byte, error) {
	raw, err := marshalPayload(payload)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload of run %s: %w", event, runID, err)
	}
	env := wireEnvelope{
		SchemaVersion: SchemaVersion,
		RunID:         runID,
		Event:         event,
		Payload:       raw,
		CreatedAt:     at.UTC().Format(createdAtLayout),
	}
	if threadID != "" {
		env.ThreadID = &threadID
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode %s envelope of run %s: %w", event, runID, err)
	}
	return b, nil
}

func marshalPayload(payload any) (json.RawMessage, error) {
	switch p := payload.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case json.RawMessage:
		if len(p) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return p, nil
	}
	return json.Marshal(payload)
}

// Event is one event of an AppendBatch.
type Event struct {
	Type    string
	Payload any
}

// Writer appends to run and queue streams and signals cancellation. It is
// safe for concurrent use; besides its client it holds the process's one
// cancel subscription (see WatchCancel).
type Writer struct {
	rdb       *redis.Client
	cfg       Config
	once      *redis.Script
	onceBatch *redis.Script
	cancels   *cancelHub
}

// NewWriter returns a Writer over rdb. The caller owns rdb and closes it.
func NewWriter(rdb *redis.Client, cfg Config) *Writer {
	return &Writer{rdb: rdb, cfg: cfg.withDefaults(), once: redis.NewScript(appendOnceLua), onceBatch: redis.NewScript(appendOnceBatchLua), cancels: newCancelHub()}
}

// Config returns the configuration with defaults applied.
func (w *Writer) Config() Config { return w.cfg }

func (w *Writer) xaddArgs(key, event string, env []byte, now time.Time) *redis.XAddArgs {
	return &redis.XAddArgs{
		Stream: key,
		MaxLen: w.cfg.MaxLen,
		Approx: true,
		Values: []any{fieldEventType, event, fieldPayload, env, fieldTS, strconv.FormatInt(now.UnixMilli(), 10)},
	}
}

// Append adds one event to run runID's stream and returns its stream id, which
// is also the SSE event id. The XADD and the TTL refresh travel in one round
// trip. Append is not idempotent: a retried call appends again; use AppendOnce
// for events that must appear once.
func (w *Writer) Append(ctx context.Context, runID, threadID, event string, payload any) (string, error) {
	ids, err := w.AppendBatch(ctx, runID, threadID, []Event{{Type: event, Payload: payload}})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// AppendBatch adds events to run runID's stream in order, in one round trip,
// and returns their ids. On error some leading events may have been appended.
func (w *Writer) AppendBatch(ctx context.Context, runID, threadID string, events []Event) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	now := time.Now()
	key := w.cfg.RunKey(runID)
	args := make([]*redis.XAddArgs, len(events))
	for i, ev := range events {
		env, err := BuildEnvelope(runID, threadID, ev.Type, ev.Payload, now)
		if err != nil {
			return nil, err
		}
		args[i] = w.xaddArgs(key, ev.Type, env, now)
	}
	cmds := make([]*redis.StringCmd, len(events))
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, a := range args {
			cmds[i] = p.XAdd(ctx, a)
		}
		p.PExpire(ctx, key, w.cfg.StreamTTL)
		// The once-markers live as long as the stream, so a late AppendOnce
		// cannot duplicate an end that is still readable.
		p.PExpire(ctx, w.cfg.onceKey(runID), w.cfg.StreamTTL)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append %d events to run %s: %w", len(events), runID, err)
	}
	ids := make([]string, len(cmds))
	for i, c := range cmds {
		ids[i] = c.Val()
	}
	return ids, nil
}

// appendOnceLua: KEYS[1] stream, KEYS[2] once hash; ARGV once key, maxlen,
// event type, envelope, ts, ttl ms, end tail ms. Returns {appended (0|1), id}.
// An `end` leaves the stream EndTail to live; the once hash keeps the TTL.
const appendOnceLua = `
local prev = redis.call('HGET', KEYS[2], ARGV[1])
if prev then
  return {0, prev}
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
  'event_type', ARGV[3], 'payload', ARGV[4], 'ts', ARGV[5])
redis.call('HSET', KEYS[2], ARGV[1], id)
if ARGV[3] == 'end' then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {1, id}
`

// AppendOnce appends the event unless an event with the same onceKey was
// already appended to run runID (atomically, in Lua). It returns the id of the
// event that holds the key — the new one when appended is true, the earlier
// one otherwise. It is used for the single `end` event that both the step that
// finished a run and a recovery sweep may try to write (close the run's
// Batcher first, so the end follows every message). The marker expires with
// the stream, or — once the stream ended — after StreamTTL, while the
// stream itself is gone after EndTail.
func (w *Writer) AppendOnce(ctx context.Context, runID, threadID, onceKey, event string, payload any) (id string, appended bool, err error) {
	now := time.Now()
	env, err := BuildEnvelope(runID, threadID, event, payload, now)
	if err != nil {
		return "", false, err
	}
	res, err := w.once.Run(ctx, w.rdb,
		[]string{w.cfg.RunKey(runID), w.cfg.onceKey(runID)},
		onceKey, w.cfg.MaxLen, event, env, now.UnixMilli(), w.cfg.StreamTTL.Milliseconds(), w.cfg.EndTail.Milliseconds(),
	).Slice()
	if err != nil {
		return "", false, fmt.Errorf("append-once %s (%s) to run %s: %w", event, onceKey, runID, err)
	}
	if len(res) != 2 {
		return "", false, fmt.Errorf("append-once %s to run %s: unexpected reply %v", event, runID, res)
	}
	flag, _ := res[0].(int64)
	id, _ = res[1].(string)
	return id, flag == 1, nil
}

// NotifyQueue appends payload to thread threadID's queue stream, waking every
// request-SSE client of that thread; they re-read request state from Postgres,
// so the payload is a hint, not a source of truth. The stream is short (MAXLEN
// ~100) and expires after StreamTTL.
func (w *Writer) NotifyQueue(ctx context.Context, threadID string, payload any) (string, error) {
	return w.notify(ctx, w.cfg.QueueKey(threadID), "queue", payload)
}

// NotifyKB appends a file status change to knowledge base kbID's stream
// (short, expiring like the queue streams); the KB events SSE serves it.
func (w *Writer) NotifyKB(ctx context.Context, kbID string, payload any) (string, error) {
	return w.notify(ctx, w.cfg.KBKey(kbID), "file_status", payload)
}

func (w *Writer) notify(ctx context.Context, key, event string, payload any) (string, error) {
	raw, err := marshalPayload(payload)
	if err != nil {
		return "", fmt.Errorf("encode notice for %s: %w", key, err)
	}
	now := time.Now()
	var add *redis.StringCmd
	_, err = w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		add = p.XAdd(ctx, &redis.XAddArgs{
			Stream: key,
			MaxLen: queueStreamMaxLen,
			Approx: true,
			Values: []any{fieldEventType, event, fieldPayload, []byte(raw), fieldTS, strconv.FormatInt(now.UnixMilli(), 10)},
		})
		p.PExpire(ctx, key, w.cfg.StreamTTL)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("notify %s: %w", key, err)
	}
	return add.Val(), nil
}

// OnceEvent is an event of AppendOnceBatch. An empty OnceKey appends the
// event unconditionally; otherwise at most once per (run, OnceKey).
type OnceEvent struct {
	OnceKey string
	Type    string
	Payload any
}

// appendOnceBatchLua: KEYS[1] stream, KEYS[2] once hash; ARGV maxlen, ttl ms,
// ts, end tail ms, then (once key, event type, envelope) triples. Appends in
// order, skipping keyed events already present. A batch that carries an
// `end` (appended now or earlier) leaves the stream the end tail to live; a
// batch whose events were all skipped creates nothing. Returns the number
// appended.
const appendOnceBatchLua = `
local n = 0
local ended = false
for i = 5, #ARGV, 3 do
  local key = ARGV[i]
  if ARGV[i+1] == 'end' then ended = true end
  if key == '' or not redis.call('HGET', KEYS[2], key) then
    local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*',
      'event_type', ARGV[i+1], 'payload', ARGV[i+2], 'ts', ARGV[3])
    if key ~= '' then redis.call('HSET', KEYS[2], key, id) end
    n = n + 1
  end
end
if ended then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return n
`

// AppendOnceBatch appends events to run runID's stream in order, atomically
// and in one round trip, each keyed event at most once (see AppendOnce). A
// step that ends a run writes its last message marker and the closing events
// with it; a recovery path repeating the keyed ones adds nothing. After the
// `end`, the stream lives Config.EndTail, not StreamTTL.
func (w *Writer) AppendOnceBatch(ctx context.Context, runID, threadID string, evs []OnceEvent) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	now := time.Now()
	args := []any{w.cfg.MaxLen, w.cfg.StreamTTL.Milliseconds(), now.UnixMilli(), w.cfg.EndTail.Milliseconds()}
	for _, e := range evs {
		env, err := BuildEnvelope(runID, threadID, e.Type, e.Payload, now)
		if err != nil {
			return 0, err
		}
		args = append(args, e.OnceKey, e.Type, env)
	}
	n, err := w.onceBatch.Run(ctx, w.rdb, []string{w.cfg.RunKey(runID), w.cfg.onceKey(runID)}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("append %d events to run %s: %w", len(evs), runID, err)
	}
	return n, nil
}
