package runtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// Stream is a real Redis run stream (under a prefix of the test's own) that
// a fixture's stores write to, and a reader of what they wrote.
type Stream struct {
	*runstream.Writer
	Redis *redis.Client
	t     testing.TB
}

// StreamEntry is one event of a run's stream: its name and its payload
// decoded as JSON.
type StreamEntry struct {
	ID      string
	Event   string
	Payload map[string]any
}

// NewStreamed is New whose run store (and the queue over it) appends to a
// real Redis run stream, f.Stream. Without Redis the test is skipped (fails
// under CI), as redistest does.
func NewStreamed(t testing.TB) *Fixture {
	t.Helper()
	f := New(t)
	rdb, prefix := redistest.New(t)
	f.Stream = &Stream{Writer: runstream.NewWriter(rdb, runstream.Config{Prefix: prefix}), Redis: rdb, t: t}
	f.Runs = run.NewStore(f.Pool, f.Outbox, f.Stream.Writer, nil)
	f.Queue = queue.NewService(f.Pool, f.Outbox, f.Runs, f.Agents, Models{Default: "fake:model"}, nil)
	return f
}

// Read returns every event of run runID's stream, in order.
func (s *Stream) Read(runID string) []StreamEntry {
	s.t.Helper()
	msgs, err := s.Redis.XRange(context.Background(), s.Config().RunKey(runID), "-", "+").Result()
	if err != nil {
		s.t.Fatalf("read stream of %s: %v", runID, err)
	}
	out := make([]StreamEntry, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["payload"].(string)
		var env runstream.Envelope
		if err := json.Unmarshal([]byte(raw), &env); err != nil {
			s.t.Fatalf("stream entry %s of %s: %v", m.ID, runID, err)
		}
		var p map[string]any
		_ = json.Unmarshal(env.Payload, &p)
		out = append(out, StreamEntry{ID: m.ID, Event: env.Event, Payload: p})
	}
	return out
}

// Count is the number of events named event in run runID's stream.
func (s *Stream) Count(runID, event string) int {
	s.t.Helper()
	n := 0
	for _, e := range s.Read(runID) {
		if e.Event == event {
			n++
		}
	}
	return n
}

// Last returns the last event named event of run runID's stream; ok is
// false when there is none.
func (s *Stream) Last(runID, event string) (e StreamEntry, ok bool) {
	s.t.Helper()
	for _, x := range s.Read(runID) {
		if x.Event == event {
			e, ok = x, true
		}
	}
	return e, ok
}
