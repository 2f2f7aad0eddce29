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
// a stop function. It subscribes before it returns and then checks the flag,
// so no signal can fall between the two; if the flag is already set the
// returned channel is already closed. The channel is closed only by a cancel,
// never by stop or by ctx. stop releases the subscription and waits for the
// watching goroutine; it is idempotent and must be called even after ctx has
// ended. Costs: one pub/sub
// connection, plus one EXISTS every 2s as a safety net.
func (w *Writer) WatchCancel(ctx context.Context, runID string) (<-chan struct{}, func()) {
	fired := make(chan struct{})
	var fireOnce sync.Once
	fire := func() { fireOnce.Do(func() { close(fired) }) }

	wctx, cancel := context.WithCancel(ctx)
	ps := w.rdb.Subscribe(wctx, w.cfg.cancelChannel(runID))
	_, subErr := ps.ReceiveTimeout(wctx, subscribeConfirmTimeout)
	var msgs <-chan *redis.Message
	if subErr == nil {
		msgs = ps.Channel()
	} else {
		// Without a subscription the poll below is the only signal.
		_ = ps.Close()
	}
	if set, err := w.CancelRequested(wctx, runID); err == nil && set {
		fire()
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		poll := time.NewTicker(cancelPollInterval)
		defer poll.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-fired:
				return
			case _, ok := <-msgs:
				if !ok {
					msgs = nil // closed by stop; wctx ends too
					continue
				}
				fire()
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
			cancel()
			if subErr == nil {
				_ = ps.Close() // the connection is discarded either way
			}
			wg.Wait()
		})
	}
	return fired, stop
}
