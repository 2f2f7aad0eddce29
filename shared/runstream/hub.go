package runstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors a Subscription may end with (Subscription.Err).
var (
	// ErrSlowConsumer: the consumer fell more than Config.SubscriptionBuffer
	// entries behind. Nothing is lost: the client reconnects with its last id.
	ErrSlowConsumer = errors.New("runstream: subscriber too slow, subscription closed")
	// ErrHubClosed: the Hub's Run returned (process shutting down).
	ErrHubClosed = errors.New("runstream: hub closed")
)

// CursorNew, given to Subscribe, means "only entries appended from now on".
const CursorNew = "$"

// Entry is one stream entry as a subscriber sees it.
type Entry struct {
	ID    string // stream id, e.g. "1718000000000-0"; the SSE event id
	Event string // event_type field
	Data  []byte // payload field: the envelope JSON
}

// Hub multiplexes all stream subscriptions of a process onto ONE blocking
// XREAD (COUNT 200) on a dedicated connection. Subscribing to a stream that is
// not yet followed, or dropping the last subscription of one, wakes the reader
// through a per-hub wake stream that is part of every XREAD. Backlogs are read
// by the subscription itself with XRANGE, so a late subscriber never delays
// the live entries of others.
//
// Run must be running for subscriptions to receive live entries. A Hub is
// safe for concurrent use.
type Hub struct {
	rdb      *redis.Client
	blockOpt redis.Options // of the blocking XREAD client, copied in NewHub
	cfg      Config
	log      *slog.Logger
	wakeKey  string
	wake     chan struct{} // capacity 1: coalesced wake requests

	mu      sync.Mutex
	state   hubState
	streams map[string]*hubStream

	reads     atomic.Int64
	delivered atomic.Int64
	slow      atomic.Int64
}

type hubState int

const (
	hubNew hubState = iota
	hubRunning
	hubStopped
)

// hubStream is one followed stream key. Guarded by Hub.mu.
type hubStream struct {
	key string
	// following: cursor is known and the key is in the XREAD set. It becomes
	// true when the first subscription finishes its catch-up.
	following bool
	cursor    streamID // last id read by the shared reader
	cursorID  string   // cursor as sent to XREAD (kept to avoid formatting it per read)
	subs      map[*Subscription]struct{}
}

// HubStats is a snapshot of a Hub's counters.
type HubStats struct {
	Streams       int   // keys in the XREAD set
	Subscriptions int   // open subscriptions
	Reads         int64 // XREAD calls issued by the shared reader
	Delivered     int64 // live entries handed to subscriptions
	SlowClosed    int64 // subscriptions closed with ErrSlowConsumer
}

// NewHub returns a Hub reading through rdb (backlogs, wake-ups) and through a
// dedicated connection with the same options (the blocking read). The caller
// owns rdb; log may be nil.
func NewHub(rdb *redis.Client, cfg Config, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Hub{
		rdb:      rdb,
		blockOpt: blockingOptions(rdb, cfg.ReadBlock),
		cfg:      cfg,
		log:      log,
		wakeKey:  cfg.Prefix + "hub:wake:" + hex.EncodeToString(b),
		wake:     make(chan struct{}, 1),
		streams:  make(map[string]*hubStream),
	}
}

// RunKey is Config.RunKey with this hub's prefix.
func (h *Hub) RunKey(runID string) string { return h.cfg.RunKey(runID) }

// QueueKey is Config.QueueKey with this hub's prefix.
func (h *Hub) QueueKey(threadID string) string { return h.cfg.QueueKey(threadID) }

// KBKey is the key of knowledge base kbID's file status stream.
func (h *Hub) KBKey(kbID string) string { return h.cfg.KBKey(kbID) }

// Stats returns the hub's counters.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	st := HubStats{}
	for _, s := range h.streams {
		if s.following {
			st.Streams++
		}
		st.Subscriptions += len(s.subs)
	}
	h.mu.Unlock()
	st.Reads = h.reads.Load()
	st.Delivered = h.delivered.Load()
	st.SlowClosed = h.slow.Load()
	return st
}

// Subscription delivers the entries of one stream after a cursor: every entry
// with id > cursor, in order, exactly once. Its channel is closed when the
// subscription ends — by Close, by a slow consumer (ErrSlowConsumer), by the
// hub stopping (ErrHubClosed) or by a Redis error during catch-up — and Err
// then tells why.
type Subscription struct {
	hub      *Hub
	key      string
	ch       chan Entry
	caughtUp chan struct{}
	done     chan struct{}
	cancel   context.CancelFunc // stops the catch-up reads

	// Guarded by hub.mu.
	stream   *hubStream
	live     bool // catch-up finished: the reader sends directly
	catching bool // the catch-up goroutine may still send on ch; it closes ch
	ended    bool
	err      error
	cursor   streamID // last id sent on ch (live mode)
	pending  []Entry  // live entries read while catching up
}

// C returns the entries. It is closed when the subscription ends.
func (s *Subscription) C() <-chan Entry { return s.ch }

// CaughtUp is closed once every entry that existed when the catch-up finished
// has been sent on C; entries that follow are live. It is never closed if the
// subscription ends first.
func (s *Subscription) CaughtUp() <-chan struct{} { return s.caughtUp }

// Done is closed when the subscription ends (before C is closed).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended: nil while open or after Close.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription; no entry is sent after it returns, and C is
// closed (at once, or as soon as an in-flight catch-up send gives up). If it
// was the stream's last subscription the stream leaves the XREAD set.
// Idempotent.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	s.hub.endLocked(s, nil)
	s.hub.mu.Unlock()
}

// Subscribe follows stream key from cursor after: "" or "0-0" for the whole
// stream, an id for everything after it, CursorNew for entries appended from
// now on. Any other value means "0-0". The caller must Close the subscription.
func (h *Hub) Subscribe(key, after string) *Subscription {
	ctx, cancel := context.WithCancel(context.Background())
	sub := &Subscription{
		hub:      h,
		key:      key,
		ch:       make(chan Entry, h.cfg.SubscriptionBuffer),
		caughtUp: make(chan struct{}),
		done:     make(chan struct{}),
		cancel:   cancel,
	}
	h.mu.Lock()
	if h.state == hubStopped {
		sub.ended, sub.err = true, ErrHubClosed
		close(sub.done)
		close(sub.ch)
		h.mu.Unlock()
		cancel()
		return sub
	}
	s := h.streams[key]
	if s == nil {
		s = &hubStream{key: key, subs: make(map[*Subscription]struct{})}
		h.streams[key] = s
	}
	s.subs[sub] = struct{}{}
	sub.stream = s
	sub.catching = true
	h.mu.Unlock()
	go h.catchUp(ctx, sub, after)
	return sub
}

// endLocked ends sub with err. Called with h.mu held; idempotent.
func (h *Hub) endLocked(sub *Subscription, err error) {
	if sub.ended {
		return
	}
	sub.ended, sub.err = true, err
	sub.pending = nil
	close(sub.done)
	sub.cancel()
	if s := sub.stream; s != nil {
		delete(s.subs, sub)
		if len(s.subs) == 0 && h.streams[s.key] == s {
			delete(h.streams, s.key)
			if s.following {
				h.requestWake() // shrink the XREAD set now, not at the next timeout
			}
		}
	}
	if errors.Is(err, ErrSlowConsumer) {
		h.slow.Add(1)
	}
	if !sub.catching {
		close(sub.ch)
	}
}

func (h *Hub) requestWake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// catchUp sends sub its backlog, then hands it to the shared reader. It runs
// in its own goroutine, so a long backlog only waits on its own consumer.
//
// Why there is neither gap nor duplicate: the reader sends a stream's entries
// > stream.cursor to every subscription in stream.subs — into sub.pending
// while sub is not live. sub joined stream.subs before this goroutine started,
// so pending holds every entry after X, the stream cursor when the stream was
// (or became) followed. The XRANGE reads go past X: to the stream's end when
// the stream was not followed yet (and the stream then starts at our cursor),
// or up to the current stream cursor otherwise. Pending entries at or below
// the catch-up cursor are dropped.
func (h *Hub) catchUp(ctx context.Context, sub *Subscription, after string) {
	err := h.doCatchUp(ctx, sub, after)
	h.mu.Lock()
	if err != nil && !sub.ended {
		h.log.Warn("runstream: subscription catch-up failed", "key", sub.key, "err", err)
		h.endLocked(sub, err)
	}
	sub.catching = false
	if sub.ended {
		close(sub.ch)
	}
	h.mu.Unlock()
}

func (h *Hub) doCatchUp(ctx context.Context, sub *Subscription, after string) error {
	var cur streamID
	if after == CursorNew {
		last, err := h.rdb.XRevRangeN(ctx, sub.key, "+", "-", 1).Result()
		if err != nil {
			return fmt.Errorf("read last id of %s: %w", sub.key, err)
		}
		if len(last) > 0 {
			cur, _ = parseID(last[0].ID)
		}
	} else {
		cur, _ = parseID(NormalizeCursor(after))
	}

	end := "+"
	for round := 0; ; round++ {
		var err error
		if cur, err = h.sendRange(ctx, sub, cur, end); err != nil {
			return err
		}
		h.mu.Lock()
		if sub.ended {
			h.mu.Unlock()
			return nil
		}
		s := sub.stream
		switch {
		case !s.following:
			// Nobody reads this stream yet: it starts where we stopped.
			s.following, s.cursor, s.cursorID = true, cur, cur.String()
			h.requestWake()
		case round == 0 && cur.less(s.cursor):
			// The reader is ahead of us; read up to its cursor, the rest is
			// in pending.
			end = s.cursor.String()
			h.mu.Unlock()
			continue
		}
		h.mu.Unlock()
		return h.drainPending(ctx, sub, cur)
	}
}

// sendRange sends the entries of (cur, end] to sub, blocking on its consumer,
// and returns the id of the last one sent (or cur, or end if the range held
// nothing beyond cur).
func (h *Hub) sendRange(ctx context.Context, sub *Subscription, cur streamID, end string) (streamID, error) {
	for {
		msgs, err := h.rdb.XRangeN(ctx, sub.key, "("+cur.String(), end, DefaultReadCount).Result()
		if err != nil {
			if ctx.Err() != nil {
				return cur, nil // ended by Close
			}
			return cur, fmt.Errorf("read backlog of %s after %s: %w", sub.key, cur, err)
		}
		for _, m := range msgs {
			id, ok := parseID(m.ID)
			if !ok || !cur.less(id) {
				continue
			}
			select {
			case sub.ch <- toEntry(m):
				cur = id
			case <-sub.done:
				return cur, nil
			}
		}
		if len(msgs) < DefaultReadCount {
			if endID, ok := parseID(end); ok && cur.less(endID) {
				cur = endID // the range is exhausted; entries up to end are gone
			}
			return cur, nil
		}
	}
}

// drainPending sends the entries the reader parked in sub.pending, then makes
// sub live. Sends block on the consumer, outside the lock.
func (h *Hub) drainPending(ctx context.Context, sub *Subscription, cur streamID) error {
	for {
		h.mu.Lock()
		if sub.ended {
			h.mu.Unlock()
			return nil
		}
		var next *Entry
		for len(sub.pending) > 0 {
			e := sub.pending[0]
			sub.pending = sub.pending[1:]
			if id, ok := parseID(e.ID); ok && cur.less(id) {
				next = &e
				break
			}
		}
		if next == nil {
			sub.pending = nil
			sub.live, sub.cursor = true, cur
			close(sub.caughtUp)
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
		select {
		case sub.ch <- *next:
			cur, _ = parseID(next.ID)
		case <-sub.done:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func toEntry(m redis.XMessage) Entry {
	e := Entry{ID: m.ID}
	if v, ok := m.Values[fieldEventType].(string); ok {
		e.Event = v
	}
	if v, ok := m.Values[fieldPayload].(string); ok {
		e.Data = []byte(v)
	}
	return e
}

// Run is the shared reader: it blocks in XREAD over every followed stream and
// the hub's wake stream, and hands entries to subscriptions. It returns when
// ctx ends (nil) — then every subscription ends with ErrHubClosed and later
// Subscribe calls return ended subscriptions. Run may be called once.
// Redis errors are logged and retried with backoff; subscriptions survive
// them and resume from their cursors.
func (h *Hub) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.state != hubNew {
		h.mu.Unlock()
		return errors.New("runstream: Hub.Run called twice")
	}
	h.state = hubRunning
	h.mu.Unlock()

	blocking := redis.NewClient(&h.blockOpt)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // unblock the XREAD at shutdown: go-redis ignores cancellation mid-read
		defer wg.Done()
		<-ctx.Done()
		_ = blocking.Close()
	}()
	go func() {
		defer wg.Done()
		h.wakeLoop(ctx)
	}()

	defer func() {
		wg.Wait()
		h.mu.Lock()
		h.state = hubStopped
		for _, s := range h.streams {
			for sub := range s.subs {
				h.endLocked(sub, ErrHubClosed)
			}
		}
		h.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		h.rdb.Del(cctx, h.wakeKey)
	}()

	wakeCursor := "0-0"
	var args []string
	var snap []*hubStream
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		args, snap = h.snapshot(args[:0], snap[:0], wakeCursor)
		h.reads.Add(1)
		res, err := blocking.XRead(ctx, &redis.XReadArgs{
			Streams: args,
			Count:   DefaultReadCount,
			Block:   h.cfg.ReadBlock,
		}).Result()
		if err != nil {
			if errors.Is(err, redis.Nil) {
				continue // block timeout
			}
			if ctx.Err() != nil {
				return nil
			}
			h.log.Warn("runstream: hub read failed", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		h.deliver(res, snap, &wakeCursor)
	}
	return nil
}

// snapshot fills args with the XREAD STREAMS arguments — every followed key
// and the wake key, then their cursors — and snap with the followed streams.
func (h *Hub) snapshot(args []string, snap []*hubStream, wakeCursor string) ([]string, []*hubStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.streams {
		if s.following {
			args = append(args, s.key)
			snap = append(snap, s)
		}
	}
	args = append(args, h.wakeKey)
	for _, s := range snap {
		args = append(args, s.cursorID)
	}
	return append(args, wakeCursor), snap
}

// deliver hands an XREAD result to the subscriptions. A stream that was
// dropped (or dropped and re-added) since the snapshot is skipped: its new
// subscriptions catch up by themselves.
func (h *Hub) deliver(res []redis.XStream, snap []*hubStream, wakeCursor *string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range res {
		if st.Stream == h.wakeKey {
			if n := len(st.Messages); n > 0 {
				*wakeCursor = st.Messages[n-1].ID
			}
			continue
		}
		s := h.streams[st.Stream]
		if s == nil || !s.following || !inSnapshot(snap, s) {
			continue
		}
		for _, m := range st.Messages {
			id, ok := parseID(m.ID)
			if !ok || !s.cursor.less(id) {
				continue
			}
			s.cursor, s.cursorID = id, m.ID
			e := toEntry(m)
			for sub := range s.subs {
				h.offerLocked(sub, e, id)
			}
		}
	}
}

func inSnapshot(snap []*hubStream, s *hubStream) bool {
	for _, x := range snap {
		if x == s {
			return true
		}
	}
	return false
}

// offerLocked gives a live entry to sub without ever blocking the reader.
func (h *Hub) offerLocked(sub *Subscription, e Entry, id streamID) {
	if sub.ended {
		return
	}
	if !sub.live {
		if len(sub.pending) >= h.cfg.SubscriptionBuffer {
			h.endLocked(sub, ErrSlowConsumer)
			return
		}
		sub.pending = append(sub.pending, e)
		return
	}
	if !sub.cursor.less(id) {
		return
	}
	select {
	case sub.ch <- e:
		sub.cursor = id
		h.delivered.Add(1)
	default:
		h.endLocked(sub, ErrSlowConsumer)
	}
}

// wakeLoop turns wake requests into XADDs on the wake stream, which is part
// of every XREAD, so a blocked reader returns and re-reads its key set.
func (h *Hub) wakeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		_, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.XAdd(ctx, &redis.XAddArgs{
				Stream: h.wakeKey,
				MaxLen: wakeStreamMaxLen,
				Values: []any{"w", "1"},
			})
			p.PExpire(ctx, h.wakeKey, wakeStreamTTL)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			// The reader will pick the change up at its next block timeout.
			h.log.Warn("runstream: hub wake failed", "err", err)
		}
	}
}

// blockingOptions are the options of a one-connection client with rdb's
// settings for the blocking XREAD, so it never holds a connection of rdb's
// pool. Its read timeout exceeds the block time. They are copied when the
// hub is made (NewHub), not when it runs: go-redis writes to a client's
// options while it makes its first connection, so copying them from a client
// already in use races with that write.
func blockingOptions(rdb *redis.Client, block time.Duration) redis.Options {
	opt := *rdb.Options()
	if opt.MaintNotificationsConfig != nil {
		c := *opt.MaintNotificationsConfig
		opt.MaintNotificationsConfig = &c
	}
	opt.ClientSideCacheConfig = nil
	opt.ClientSideCache = nil
	opt.PushNotificationProcessor = nil
	opt.PoolSize = 1
	opt.MinIdleConns = 0
	opt.MaxIdleConns = 1
	opt.MaxActiveConns = 1
	opt.ReadTimeout = block + 5*time.Second
	opt.ConnMaxIdleTime = 0
	return opt
}
