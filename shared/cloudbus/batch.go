package cloudbus

import (
	"context"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// sendFunc sends one batch and returns one error per entry (nil: accepted).
// A request-level failure is returned for every entry.
type sendFunc func(ctx context.Context, batch []cloudevents.Event) []error

// batcher gathers concurrent Publish calls into batches of at most max
// events: a batch leaves when it is full or linger after its first event.
// Batches are sent concurrently; each caller waits for its own entry's result.
type batcher struct {
	max     int
	linger  time.Duration
	timeout time.Duration // per request
	send    sendFunc

	mu    sync.Mutex
	queue []*entry
	timer *time.Timer
}

type entry struct {
	ev   cloudevents.Event
	done chan error
}

func newBatcher(max int, linger, timeout time.Duration, send sendFunc) *batcher {
	return &batcher{max: max, linger: linger, timeout: timeout, send: send}
}

// publish queues ev and waits for the result of the request that carries it.
// When ctx ends first the result is not known: ctx.Err() is returned (the
// relay then leaves the row to the sweep, and a duplicate is harmless).
func (b *batcher) publish(ctx context.Context, ev cloudevents.Event) error {
	e := &entry{ev: ev, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, e)
	var full []*entry
	if len(b.queue) >= b.max {
		full = b.take()
	} else if b.timer == nil {
		b.timer = time.AfterFunc(b.linger, b.flushTimer)
	}
	b.mu.Unlock()
	if full != nil {
		go b.flush(full)
	}
	select {
	case err := <-e.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take removes up to max queued entries; b.mu is held.
func (b *batcher) take() []*entry {
	n := min(len(b.queue), b.max)
	out := make([]*entry, n)
	copy(out, b.queue[:n])
	b.queue = append(b.queue[:0], b.queue[n:]...)
	if len(b.queue) == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return out
}

func (b *batcher) flushTimer() {
	b.mu.Lock()
	b.timer = nil
	var batches [][]*entry
	for len(b.queue) > 0 {
		batches = append(batches, b.take())
	}
	b.mu.Unlock()
	for _, batch := range batches {
		go b.flush(batch)
	}
}

func (b *batcher) flush(batch []*entry) {
	// The request outlives any one caller: callers may give up waiting, the
	// entries of the others still go out.
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	evs := make([]cloudevents.Event, len(batch))
	for i, e := range batch {
		evs[i] = e.ev
	}
	errs := b.send(ctx, evs)
	for i, e := range batch {
		e.done <- errs[i]
	}
}

// all returns n copies of err.
func all(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
