package runstream

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"
)

// defaultWriteTimeout bounds one flush to a client that stopped reading.
const defaultWriteTimeout = 30 * time.Second

// maxBatch bounds how many ready entries are written before one flush.
const maxBatch = 256

// EventWriter buffers Server-Sent Events and writes them to the client in
// one write and one flush per batch. It is used by one goroutine (the handler).
type EventWriter struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	buf          []byte
	writeTimeout time.Duration
	started      bool
}

// NewEventWriter wraps w. Nothing is written until Start or the first Flush.
func NewEventWriter(w http.ResponseWriter) *EventWriter {
	return &EventWriter{w: w, rc: http.NewResponseController(w), writeTimeout: defaultWriteTimeout}
}

// Start sends the SSE response headers (200, text/event-stream, no-cache,
// X-Accel-Buffering: no) and flushes them. Idempotent.
func (sw *EventWriter) Start() error {
	if sw.started {
		return nil
	}
	sw.started = true
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
	return sw.rc.Flush()
}

// Event buffers `event: <event>\ndata: <data>\nid: <id>\n\n`. An empty id
// omits the id line; data lines are split on newlines as SSE requires.
func (sw *EventWriter) Event(event, id string, data []byte) {
	if event != "" {
		sw.buf = append(sw.buf, "event: "...)
		sw.buf = append(sw.buf, event...)
		sw.buf = append(sw.buf, '\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		sw.buf = append(sw.buf, "data: "...)
		sw.buf = append(sw.buf, bytes.TrimSuffix(line, []byte{'\r'})...)
		sw.buf = append(sw.buf, '\n')
		if !more {
			break
		}
		data = rest
	}
	if id != "" {
		sw.buf = append(sw.buf, "id: "...)
		sw.buf = append(sw.buf, id...)
		sw.buf = append(sw.buf, '\n')
	}
	sw.buf = append(sw.buf, '\n')
}

// Comment buffers `: <text>\n\n` (heartbeats).
func (sw *EventWriter) Comment(text string) {
	sw.buf = append(sw.buf, ": "...)
	sw.buf = append(sw.buf, text...)
	sw.buf = append(sw.buf, "\n\n"...)
}

// Buffered reports whether something waits for Flush.
func (sw *EventWriter) Buffered() bool { return len(sw.buf) > 0 }

// Flush writes what was buffered and flushes it to the client.
func (sw *EventWriter) Flush() error {
	if err := sw.Start(); err != nil {
		return err
	}
	if len(sw.buf) == 0 {
		return nil
	}
	// Not every ResponseWriter supports deadlines; without one a stuck client
	// is still released when its connection dies.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.writeTimeout))
	_, err := sw.w.Write(sw.buf)
	sw.buf = sw.buf[:0]
	if err != nil {
		return err
	}
	return sw.rc.Flush()
}

// StreamOptions are the connection limits of ServeStream.
type StreamOptions struct {
	// Heartbeat: a `: heartbeat` comment is sent after this long without
	// output (default 15s).
	Heartbeat time.Duration
	// MaxDuration: the response ends after this long; clients reconnect
	// (default 30 min).
	MaxDuration time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = defaultMaxDuration
	}
	return o
}

// StreamHooks turn stream entries into SSE events. Either may be nil. A hook
// returning stop=true or an error ends the response after what it buffered
// has been flushed.
type StreamHooks struct {
	// Entries receives ready entries in stream order, several at a time when
	// several are ready.
	Entries func(ctx context.Context, sw *EventWriter, batch []Entry) (stop bool, err error)
	// CaughtUp is called once, after Entries has received every entry that
	// existed when the subscription finished its catch-up. The request SSE
	// reads its initial state here: any change after that wakes it.
	CaughtUp func(ctx context.Context, sw *EventWriter) (stop bool, err error)
}

// ServeStream serves key as an SSE response: it subscribes at cursor (see
// Hub.Subscribe), sends the headers, calls the hooks, writes a heartbeat
// comment when idle, and returns when a hook stops, the client goes away (nil),
// MaxDuration passes (nil), or the subscription ends (its error: clients
// reconnect with Last-Event-ID and lose nothing). It closes its subscription
// before returning. While idle it issues no command and no query of its own.
func ServeStream(w http.ResponseWriter, r *http.Request, hub *Hub, key, cursor string, o StreamOptions, hooks StreamHooks) error {
	o = o.withDefaults()
	ctx := r.Context()
	sw := NewEventWriter(w)
	sub := hub.Subscribe(key, cursor)
	defer sub.Close()
	if err := sw.Start(); err != nil {
		return clientError{err}
	}

	heartbeat := time.NewTimer(o.Heartbeat)
	defer heartbeat.Stop()
	deadline := time.NewTimer(o.MaxDuration)
	defer deadline.Stop()
	caughtUp := sub.CaughtUp()
	batch := make([]Entry, 0, 64)

	// flush writes what the hooks buffered and restarts the heartbeat clock.
	flush := func() error {
		if !sw.Buffered() {
			return nil
		}
		if err := sw.Flush(); err != nil {
			return clientError{err}
		}
		heartbeat.Reset(o.Heartbeat)
		return nil
	}
	// handle passes every entry ready now to the Entries hook.
	handle := func(batch []Entry) (bool, error) {
		batch = takeReady(sub, batch, maxBatch-len(batch))
		if len(batch) == 0 || hooks.Entries == nil {
			return false, nil
		}
		return hooks.Entries(ctx, sw, batch)
	}
	finish := func(stop bool, err error) (bool, error) {
		if ferr := flush(); err == nil {
			err = ferr
		}
		return stop || err != nil, err
	}

	for {
		var stop bool
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-heartbeat.C:
			sw.Comment("heartbeat")
			stop, err = finish(false, nil)
		case e, ok := <-sub.C():
			if !ok {
				return sub.Err()
			}
			stop, err = finish(handle(append(batch[:0], e)))
		case <-caughtUp:
			caughtUp = nil
			// Every backlog entry is in the channel now; pass exactly those
			// (and whatever live entries precede them) before CaughtUp.
			for n := len(sub.C()); n > 0 && !stop && err == nil; {
				b := takeReady(sub, batch[:0], min(n, maxBatch))
				if len(b) == 0 {
					break
				}
				n -= len(b)
				if hooks.Entries != nil {
					stop, err = hooks.Entries(ctx, sw, b)
				}
			}
			if !stop && err == nil && hooks.CaughtUp != nil {
				stop, err = hooks.CaughtUp(ctx, sw)
			}
			stop, err = finish(stop, err)
		}
		if stop {
			if ctx.Err() != nil {
				return nil // the client left; write errors are expected
			}
			return err
		}
	}
}

// clientError marks a failure to write to the client (usually: it left).
type clientError struct{ err error }

func (e clientError) Error() string { return "write to SSE client: " + e.err.Error() }
func (e clientError) Unwrap() error { return e.err }

// IsClientError reports whether err, returned by ServeStream, is a failure to
// write to the client rather than a failure of the stream.
func IsClientError(err error) bool {
	var ce clientError
	return errors.As(err, &ce)
}

// takeReady appends up to n entries already waiting on sub's channel, without
// blocking.
func takeReady(sub *Subscription, batch []Entry, n int) []Entry {
	for range n {
		select {
		case e, ok := <-sub.C():
			if !ok {
				return batch // the closed channel is seen by the caller's next select
			}
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}
