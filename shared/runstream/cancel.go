package runstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// cancelPollInterval is the safety-net poll of WatchCancel: pub/sub messages
// published while its connection was being re-established are lost, the flag
// is not.
const cancelPollInterval = 2 * time.Second

// subscribeConfirmTimeout bounds the wait for SUBSCRIBE to be confirmed.
const subscribeConfirmTimeout = 3 * time.Second

// SignalCancel sets run runID's cancel flag (TTL 30 min) and publishes on the
// run's cancel channel, in one round trip. It is idempotent.
func (w *Writer) SignalCancel(ctx context.Context, runID string) error {
	_, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, w.cfg.CancelKey(runID), "1", cancelTTL)
		p.Publish(ctx, w.cfg.cancelChannel(runID), runID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("signal cancel of run %s: %w", runID, err)
	}
	return nil
}

// CancelRequested reports whether run runID's cancel flag is set.
func (w *Writer) CancelRequested(ctx context.Context, runID string) (bool, error) {
	n, err := w.rdb.Exists(ctx, w.cfg.CancelKey(runID)).Result()
	if err != nil {
		return false, fmt.Errorf("read cancel flag of run %s: %w", runID, err)
	}
	return n > 0, nil
}

// WatchCancel returns a channel that is closed as soon as a cancel of run
// runID is observed — including one signalled before the watch started — and
// a stop function. The watch is registered with the Writer's one shared
// pattern subscription (opened on first use, confirmed before the first watch
// returns), then the flag is checked without blocking the caller, so no signal
// can fall between the two; if the flag is already set the channel closes
// within a round trip. The
// channel is closed only by a cancel, never by stop or by ctx. stop is
// idempotent and must be called even after ctx has ended. Costs per watch:
// one EXISTS, plus one EXISTS every 2s as a safety net for messages lost
// while the shared subscription reconnects; no connection of its own.
func (w *Writer) WatchCancel(ctx context.Context, runID string) (<-chan struct{}, func()) {
	fired := make(chan struct{})
	var fireOnce sync.Once
	fire := func() { fireOnce.Do(func() { close(fired) }) }

	wctx, cancel := context.WithCancel(ctx)
	unregister := w.cancels.register(wctx, w, runID, fire)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// The flag is checked at once (a cancel signalled before the watch),
		// off the caller's path, then every cancelPollInterval.
		if set, err := w.CancelRequested(wctx, runID); err == nil && set {
			fire()
			return
		}
		poll := time.NewTicker(cancelPollInterval)
		defer poll.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-fired:
				return
			case <-poll.C:
				set, err := w.CancelRequested(wctx, runID)
				if err == nil && set {
					fire()
					return
				}
			}
		}
	}()

	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			unregister()
			cancel()
			wg.Wait()
		})
	}
	return fired, stop
}

// cancelHub is a Writer's one pattern subscription to every run's cancel
// channel, shared by all watches of the process.
type cancelHub struct {
	mu       sync.Mutex
	started  bool
	ready    chan struct{} // closed once the subscription is confirmed (or failed)
	watchers map[string]map[*func()]struct{}
}

func newCancelHub() *cancelHub {
	return &cancelHub{ready: make(chan struct{}), watchers: map[string]map[*func()]struct{}{}}
}

// register adds fire to runID's watchers, starting the subscription on first
// use, and returns the function that removes it.
func (h *cancelHub) register(ctx context.Context, w *Writer, runID string, fire func()) func() {
	h.mu.Lock()
	if !h.started {
		h.started = true
		go h.run(w)
	}
	set := h.watchers[runID]
	if set == nil {
		set = map[*func()]struct{}{}
		h.watchers[runID] = set
	}
	f := &fire
	set[f] = struct{}{}
	h.mu.Unlock()
	select {
	case <-h.ready:
	case <-ctx.Done():
	case <-time.After(subscribeConfirmTimeout):
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if set := h.watchers[runID]; set != nil {
			delete(set, f)
			if len(set) == 0 {
				delete(h.watchers, runID)
			}
		}
	}
}

// watching returns the number of runs with at least one watch (for tests).
func (h *cancelHub) watching() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

// run holds the pattern subscription for the life of the process; go-redis
// re-establishes it after connection failures (the per-watch poll covers
// messages lost meanwhile).
func (h *cancelHub) run(w *Writer) {
	ctx := context.Background()
	prefix := w.cfg.cancelChannel("")
	ps := w.rdb.PSubscribe(ctx, prefix+"*")
	_, err := ps.ReceiveTimeout(ctx, subscribeConfirmTimeout)
	close(h.ready)
	if err != nil {
		// Without a subscription the watches' polls are the only signal; try again later.
		_ = ps.Close()
		time.Sleep(cancelPollInterval)
		h.mu.Lock()
		h.started, h.ready = false, make(chan struct{})
		h.mu.Unlock()
		return
	}
	for msg := range ps.Channel() {
		runID := msg.Channel[len(prefix):]
		h.mu.Lock()
		fires := make([]func(), 0, len(h.watchers[runID]))
		for f := range h.watchers[runID] {
			fires = append(fires, *f)
		}
		h.mu.Unlock()
		for _, f := range fires {
			f()
		}
	}
}
