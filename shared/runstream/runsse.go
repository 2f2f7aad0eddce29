package runstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// RunStreamOptions describe the run SSE request. The caller fills them from
// the run row it read when it authorised the request; ServeRun itself never
// queries the database.
type RunStreamOptions struct {
	RunID     string
	ThreadID  string
	RequestID string
	// Terminal: the run had a terminal status (and no pending runtime
	// cleanup) when the request was authorised. The response then ends after
	// the backlog, with a synthetic `end` if the backlog holds none.
	Terminal bool
	// Status is the run status from the database, used by the synthetic end.
	Status string
	// Heartbeat (default 15s) and MaxDuration (default 30 min): see StreamOptions.
	Heartbeat   time.Duration
	MaxDuration time.Duration
	// Verbose: send the full envelope; otherwise the compact UI envelope
	// (?verbose=false, the web default).
	Verbose bool
}

// RunCursor returns the resume cursor of a run SSE request: the Last-Event-ID
// header wins over ?after_seq=; missing or invalid means "0-0".
func RunCursor(r *http.Request) string {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return NormalizeCursor(v)
	}
	return NormalizeCursor(r.URL.Query().Get("after_seq"))
}

// ServeRun serves GET /api/agent/runs/{run_id}/events (contracts §3.7) from
// the run's Redis stream: `event: <type>\ndata: <envelope>\nid: <stream id>`
// per event, resuming after RunCursor(r), `: heartbeat` when idle, closing
// after the `end` event, after MaxDuration, or when the client leaves. For a
// Terminal run whose stream holds no `end` after the cursor (its real end is
// still on its way, e.g. the process that finished the run died before
// writing it) it sends a synthetic `end` {status, request_id} and closes. The
// original gave that end the last id seen (or the cursor); clients drop
// events whose id is not above their last one, so they never saw it. Its id
// here is the next id after the last one seen: a client resuming from it
// still gets the real end, which always comes later. If Redis fails it sends `error` {run_id, message, reason:
// "redis_error"} and closes; a slow client is just disconnected (it resumes
// with Last-Event-ID).
func ServeRun(w http.ResponseWriter, r *http.Request, hub *Hub, o RunStreamOptions) {
	cursor := RunCursor(r)
	last := cursor
	hooks := StreamHooks{
		Entries: func(_ context.Context, sw *EventWriter, batch []Entry) (bool, error) {
			for _, e := range batch {
				last = e.ID
				data := e.Data
				if !o.Verbose {
					data = compactEnvelope(e.Event, data)
				}
				sw.Event(e.Event, e.ID, data)
				if e.Event == EventEnd {
					return true, nil
				}
			}
			return false, nil
		},
		CaughtUp: func(_ context.Context, sw *EventWriter) (bool, error) {
			if !o.Terminal {
				return false, nil
			}
			env, err := BuildEnvelope(o.RunID, o.ThreadID, EventEnd,
				End{Status: o.Status, RequestID: o.RequestID}, time.Now())
			if err != nil {
				return true, err
			}
			if !o.Verbose {
				env = compactEnvelope(EventEnd, env)
			}
			id, _ := parseID(last) // last is a normalized cursor or a stream id
			sw.Event(EventEnd, id.after().String(), env)
			return true, nil
		},
	}
	err := ServeStream(w, r, hub, hub.RunKey(o.RunID), cursor,
		StreamOptions{Heartbeat: o.Heartbeat, MaxDuration: o.MaxDuration}, hooks)
	if err == nil || r.Context().Err() != nil {
		return
	}
	if errors.Is(err, ErrSlowConsumer) || errors.Is(err, ErrHubClosed) || IsClientError(err) {
		hub.log.Debug("runstream: run stream closed", "run_id", o.RunID, "err", err)
		return
	}
	hub.log.Warn("runstream: run stream failed", "run_id", o.RunID, "err", err)
	body, _ := json.Marshal(StreamFailure{RunID: o.RunID, Message: "运行事件流暂时不可用，请重连", Reason: "redis_error"})
	sw := NewEventWriter(w)
	sw.started = true // headers went out with the stream
	sw.Event(EventError, "", body)
	_ = sw.Flush()
}
