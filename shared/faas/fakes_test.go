package faas_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// recorder is a FailureRecorder fake: it keeps what it was given.
type recorder struct {
	mu  sync.Mutex
	got []recorded
}

type recorded struct {
	ID, Type, Handler string
	Cause             error
}

func (r *recorder) RecordFailure(_ context.Context, ev cloudevents.Event, handler string, cause error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, recorded{ID: ev.ID(), Type: ev.Type(), Handler: handler, Cause: cause})
	return nil
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.got))
	for _, g := range r.got {
		out = append(out, g.ID)
	}
	slices.Sort(out)
	return out
}

func (r *recorder) find(id string) (recorded, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if g.ID == id {
			return g, true
		}
	}
	return recorded{}, false
}

// scripted is a function whose StepReady handler does what the run id says:
//
//	run_retry*  → a transient error (retry)
//	run_perm*   → Permanent(err)
//	run_block*  → signals started, then waits for release or ctx's end
//	anything else → ack
//
// It also acks every SweepRequested. Every call is remembered in order.
type scripted struct {
	router *faas.Router
	rec    *recorder

	mu    sync.Mutex
	calls []string // run ids (steps) or "sweep:<reason>"

	started chan struct{} // run_block: the handler is running
	release chan struct{} // run_block: let it finish
	blocked chan error    // run_block: ctx.Err() when it finished
}

var errTransient = errors.New("database unavailable")

func newScripted(t *testing.T) *scripted {
	t.Helper()
	s := &scripted{
		rec:     &recorder{},
		started: make(chan struct{}, 1),
		release: make(chan struct{}),
		blocked: make(chan error, 1),
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	s.router = faas.NewRouter("test-fn", s.rec, log)
	faas.On(s.router, func(ctx context.Context, in events.StepReady) error {
		s.mu.Lock()
		s.calls = append(s.calls, in.RunID)
		s.mu.Unlock()
		switch {
		case strings.HasPrefix(in.RunID, "run_retry"):
			return errTransient
		case strings.HasPrefix(in.RunID, "run_perm"):
			return faas.Permanent(errors.New("step refused"))
		case strings.HasPrefix(in.RunID, "run_block"):
			s.started <- struct{}{}
			select {
			case <-s.release:
			case <-ctx.Done():
			}
			s.blocked <- ctx.Err()
		}
		return nil
	})
	faas.On(s.router, func(ctx context.Context, in events.SweepRequested) error {
		s.mu.Lock()
		s.calls = append(s.calls, "sweep:"+in.Reason)
		s.mu.Unlock()
		return nil
	})
	return s
}

func (s *scripted) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// stepEvent builds a valid StepReady event for runID.
func stepEvent(t *testing.T, id, runID string) cloudevents.Event {
	t.Helper()
	ev, err := events.New(events.Source("tool-invoke"), id, events.StepReady{RunID: runID, ThreadID: "thread_42", StepNo: 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}
