package runstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrBatcherClosed is returned by a Batcher used after Close.
var ErrBatcherClosed = errors.New("runstream: batcher closed")

// TextSizer may be implemented by a chunk to tell the Batcher how much text it
// carries; chunks that do not implement it count their JSON length.
type TextSizer interface {
	TextLen() int
}

// backgroundFlushTimeout bounds a flush started by the timer, which has no
// caller context of its own.
const backgroundFlushTimeout = 10 * time.Second

// Batcher accumulates message chunks of one run and appends them as
// `messages` events {"items":[chunk…]}. A batch is appended when flushEvery
// has passed since its first chunk (a timer does it even if no further chunk
// arrives, so no chunk waits longer than flushEvery plus one append), when its
// text exceeds maxChars, on AddUrgent (tool calls), on Flush and on Close.
// Batches reach the stream in the order of their chunks.
//
// A Batcher is safe for one producer goroutine plus its own timer (and in fact
// for several producers). An append failure of a timer flush drops that batch
// and is returned by the next Add, Flush, Append or Close.
type Batcher struct {
	w          *Writer
	runID      string
	threadID   string
	flushEvery time.Duration
	maxChars   int

	mu     sync.Mutex // guards the fields below
	items  []json.RawMessage
	chars  int
	gen    uint64 // incremented by every flush; a timer flushes only its own batch
	timer  *time.Timer
	closed bool
	err    error      // first failure of a timer flush, not yet reported
	lead   *OnceEvent // written before the first batch (see Lead)
	mirror string     // another run whose stream also gets the batches (see Mirror)

	// wmu orders appends: it is taken while mu is still held, so batches are
	// appended in the order they were cut.
	wmu sync.Mutex
}

// NewBatcher returns a Batcher for run runID. flushEvery <= 0 means 100ms;
// maxChars <= 0 means 512.
func (w *Writer) NewBatcher(runID, threadID string, flushEvery time.Duration, maxChars int) *Batcher {
	if flushEvery <= 0 {
		flushEvery = 100 * time.Millisecond
	}
	if maxChars <= 0 {
		maxChars = 512
	}
	return &Batcher{w: w, runID: runID, threadID: threadID, flushEvery: flushEvery, maxChars: maxChars}
}

// Add buffers chunk (encoded now, so the caller may reuse it).
func (b *Batcher) Add(ctx context.Context, chunk any) error { return b.add(ctx, chunk, false) }

// AddUrgent buffers chunk and appends the batch immediately (tool calls).
func (b *Batcher) AddUrgent(ctx context.Context, chunk any) error { return b.add(ctx, chunk, true) }

func (b *Batcher) add(ctx context.Context, chunk any, urgent bool) error {
	raw, err := json.Marshal(chunk)
	if err != nil {
		return fmt.Errorf("encode message chunk of run %s: %w", b.runID, err)
	}
	n := len(raw)
	if s, ok := chunk.(TextSizer); ok {
		n = s.TextLen()
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrBatcherClosed
	}
	pending := b.takeErrLocked()
	b.items = append(b.items, raw)
	b.chars += n
	if urgent || b.chars > b.maxChars {
		return errors.Join(pending, b.flushLocked(ctx, nil))
	}
	if len(b.items) == 1 {
		gen := b.gen
		b.timer = time.AfterFunc(b.flushEvery, func() { b.onTimer(ctx, gen) })
	}
	b.mu.Unlock()
	return pending
}

func (b *Batcher) onTimer(addCtx context.Context, gen uint64) {
	b.mu.Lock()
	if b.gen != gen || len(b.items) == 0 {
		b.mu.Unlock()
		return
	}
	// The flush acts for the Add that opened the batch: keep its values, not
	// its cancellation, and bound it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(addCtx), backgroundFlushTimeout)
	defer cancel()
	if err := b.flushLocked(ctx, nil); err != nil {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
}

func (b *Batcher) takeErrLocked() error {
	err := b.err
	b.err = nil
	return err
}

// flushLocked cuts the current batch, releases b.mu and appends the batch
// followed by extra (if any) in one round trip. Called with b.mu held.
func (b *Batcher) flushLocked(ctx context.Context, extra *Event) error {
	items := b.items
	lead := b.lead
	b.items, b.lead = nil, nil
	b.chars = 0
	b.gen++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.wmu.Lock()
	b.mu.Unlock()
	defer b.wmu.Unlock()

	events := make([]Event, 0, 2)
	if len(items) > 0 {
		events = append(events, Event{Type: EventMessages, Payload: Messages{Items: items}})
	}
	if extra != nil {
		events = append(events, *extra)
	}
	if b.mirror != "" && len(items) > 0 {
		// Best effort: the mirror is a view for the parent's clients; the
		// child's own stream is the record.
		_, _ = b.w.AppendBatch(ctx, b.mirror, b.threadID, []Event{{Type: EventMessages, Payload: Messages{Items: items}}})
	}
	if lead != nil {
		// The lead event goes first, keyed, in the same atomic round trip.
		evs := make([]OnceEvent, 0, len(events)+1)
		evs = append(evs, *lead)
		for _, e := range events {
			evs = append(evs, OnceEvent{Type: e.Type, Payload: e.Payload})
		}
		_, err := b.w.AppendOnceBatch(ctx, b.runID, b.threadID, evs)
		return err
	}
	if len(events) == 0 {
		return nil
	}
	_, err := b.w.AppendBatch(ctx, b.runID, b.threadID, events)
	return err
}

// Lead makes ev (a keyed event, e.g. the run's metadata) precede the
// batcher's first batch, in the same round trip; Close writes it even when no
// chunk came. Call it before the first Add.
func (b *Batcher) Lead(ev OnceEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lead = &ev
}

// Mirror makes every batch of message chunks also go to run runID's stream
// (best effort, in a round trip of its own): a sub-agent's
// tokens appear in its parent run's SSE, each chunk scoped by the child's
// thread_id. Call it before the first Add.
func (b *Batcher) Mirror(runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mirror = runID
}

// Flush appends the buffered chunks now.
func (b *Batcher) Flush(ctx context.Context) error {
	b.mu.Lock()
	pending := b.takeErrLocked()
	return errors.Join(pending, b.flushLocked(ctx, nil))
}

// Append flushes the buffered chunks and then appends one other event in the
// same round trip, so the event follows every chunk added before it (use it
// for custom/interrupt/error events of a run that is streaming tokens).
func (b *Batcher) Append(ctx context.Context, event string, payload any) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrBatcherClosed
	}
	pending := b.takeErrLocked()
	return errors.Join(pending, b.flushLocked(ctx, &Event{Type: event, Payload: payload}))
}

// Close appends the remaining chunks and stops the timer. Further use returns
// ErrBatcherClosed; a second Close is a no-op returning nil.
func (b *Batcher) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	pending := b.takeErrLocked()
	return errors.Join(pending, b.flushLocked(ctx, nil))
}
