package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 3: event appended → bytes at the client through the intake's SSE
// endpoint, and what idle SSE clients cost the database.
const (
	sseStreams     = 200
	sseEvents      = 50 // measured events per stream
	sseInterval    = 50 * time.Millisecond
	sseTarget      = 25 * time.Millisecond
	sseIdleWindow  = 3 * time.Second
	sseFloorEvents = 300
)

// benchMark is the payload of the bench's custom events.
type benchMark struct {
	Name string `json:"name"` // "bench"
	Seq  int    `json:"bench_seq"`
	T    int64  `json:"bench_t"` // unix nanoseconds just before the append
	Warm bool   `json:"warm,omitempty"`
}

// sseClient is what one SSE client received.
type sseClient struct {
	mu         sync.Mutex
	lat        benchkit.Samples
	next       int
	outOfOrder int
}

func figSSE(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[3] SSE delivery with 200 concurrent streams, and idle streams' database cost",
		"real HTTP to the intake function's GET /api/agent/runs/{id}/events (intake as its own process; its runs stay pending, so streams stay open); "+
			"the bench appends custom events with runstream.Writer; latency = just before the append → the data line read by the client; "+
			"floor: bare XADD → XREAD BLOCK on one stream and one dedicated connection")
	db, prefix, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	in, err := e.startIntake(ctx, db, prefix)
	if err != nil {
		return err
	}
	defer in.stop()

	e.Progress("figure 3: opening %d SSE streams", sseStreams)
	runs, err := in.api.openRuns(ctx, sseStreams)
	if err != nil {
		return err
	}
	clients := make([]*sseClient, len(runs))
	for i := range clients {
		clients[i] = &sseClient{next: 1}
	}
	var received atomic.Int64
	warm := make(chan int, len(runs))
	st, err := in.api.openStreams(ctx, runs, func(i int, ev sseEvent) {
		if ev.Event != runstream.EventCustom {
			return
		}
		var env struct {
			Payload benchMark `json:"payload"`
		}
		if json.Unmarshal(ev.Data, &env) != nil || env.Payload.Name != "bench" {
			return
		}
		if env.Payload.Warm {
			warm <- i
			return
		}
		c := clients[i]
		c.mu.Lock()
		c.lat = append(c.lat, ev.At.Sub(time.Unix(0, env.Payload.T)))
		if env.Payload.Seq != c.next {
			c.outOfOrder++
		}
		c.next = env.Payload.Seq + 1
		c.mu.Unlock()
		received.Add(1)
	})
	if err != nil {
		return err
	}
	defer st.close()

	w := runstream.NewWriter(e.Redis, runstream.Config{Prefix: prefix})
	// Warm-up: every subscription is live and has delivered one event.
	for _, id := range runs {
		if _, err := w.Append(ctx, id, "", runstream.EventCustom, benchMark{Name: "bench", Warm: true}); err != nil {
			return err
		}
	}
	for range runs {
		select {
		case <-warm:
		case <-time.After(30 * time.Second):
			return errors.New("SSE clients did not receive the warm-up event within 30s")
		}
	}

	e.Progress("figure 3: floor (XADD → XREAD BLOCK), then %d events on each of %d streams", sseEvents, sseStreams)
	floor, err := redisFloor(ctx, e.Redis, prefix+"floor", sseFloorEvents, 5*time.Millisecond)
	if err != nil {
		return err
	}
	if err := produce(ctx, w, runs); err != nil {
		return err
	}
	want := int64(len(runs) * sseEvents)
	for deadline := time.Now().Add(10 * time.Second); received.Load() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := st.err(); err != nil {
		return err
	}
	var lat benchkit.Samples
	outOfOrder := 0
	for _, c := range clients {
		c.mu.Lock()
		lat = append(lat, c.lat...)
		outOfOrder += c.outOfOrder
		c.mu.Unlock()
	}
	p99, f99 := lat.P99(), floor.P99()
	r.Line("sse_delivery_p99", benchkit.Ms(p99), benchkit.X(benchkit.DurRatio(p99, f99))+" vs floor "+benchkit.Ms(f99), "≤ "+benchkit.Ms(sseTarget), p99 <= sseTarget && len(lat) > 0)
	r.Detail("p50 %s (floor p50 %s), max %s; %d events received of %d, %d out of order; %d streams",
		benchkit.Ms(lat.P50()), benchkit.Ms(floor.P50()), benchkit.Ms(lat.Pct(100)), len(lat), want, outOfOrder, len(runs))

	e.Progress("figure 3: idle window %s, then a control window with one API call", sseIdleWindow)
	idle, err := idleQueries(ctx, e, db, sseIdleWindow, nil)
	if err != nil {
		return err
	}
	control, err := idleQueries(ctx, e, db, time.Second, func(ctx context.Context) error {
		return in.api.call(ctx, "GET", "/api/agent/runs/"+runs[0], nil, nil)
	})
	if err != nil {
		return err
	}
	if err := st.err(); err != nil {
		return err
	}
	r.Line("idle_sse_queries", strconv.FormatInt(idle.xacts, 10), "floor 0: nothing to do", "0", idle.xacts == 0 && idle.opened == 0)
	r.Detail("%d idle SSE clients connected throughout a %s window: the intake's database counted %d transactions (pg_stat_database xact_commit+xact_rollback) "+
		"and the intake opened %d connections; its %d connections from authorising the streams were closed before the window so that every counter was published",
		len(runs), sseIdleWindow, idle.xacts, idle.opened, idle.closed)
	r.Detail("control: the same method around one GET /api/agent/runs/{id} in a 1s window counted %d transactions and %d new connections (must not be 0)",
		control.xacts, control.opened)
	if control.xacts == 0 || control.opened == 0 {
		return errors.New("the idle-query method did not see the control request's queries")
	}
	return nil
}

// produce appends sseEvents events to every run, one every sseInterval per
// run, the runs' producers spread over one interval.
func produce(ctx context.Context, w *runstream.Writer, runs []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(runs))
	for i, id := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * sseInterval / time.Duration(len(runs)))
			for seq := 1; seq <= sseEvents; seq++ {
				m := benchMark{Name: "bench", Seq: seq, T: time.Now().UnixNano()}
				if _, err := w.Append(ctx, id, "", runstream.EventCustom, m); err != nil {
					errs <- fmt.Errorf("append to run %s: %w", id, err)
					return
				}
				time.Sleep(sseInterval)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type idleResult struct {
	closed int   // the intake's database connections closed before the window
	opened int   // connections the intake opened during the window
	xacts  int64 // transactions counted in the intake's database meanwhile
}

// idleQueries counts the intake's transactions while its SSE clients are
// idle. Nothing else uses the figure's database; the reader is connected to
// another one. Idle backends may keep their counters unpublished, so the
// intake's connections are closed before the window (they publish as they
// exit): any statement in the window then needs a new connection, which
// pg_stat_activity shows live, and whose counters are published when it is
// closed after the window in turn.
//
// during, when not nil, runs at the start of the window: the control run
// makes one API call there to show that the method sees it.
func idleQueries(ctx context.Context, e *env, db benchkit.DB, window time.Duration, during func(context.Context) error) (idleResult, error) {
	var res idleResult
	var err error
	if res.closed, err = e.terminateBackends(ctx, db.Name); err != nil {
		return res, err
	}
	before, err := e.dbXacts(ctx, db.Name)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if during != nil {
		if err := during(ctx); err != nil {
			return res, err
		}
	}
	time.Sleep(time.Until(t0.Add(window)))
	if res.opened, err = e.terminateBackends(ctx, db.Name); err != nil {
		return res, err
	}
	after, err := e.dbXacts(ctx, db.Name)
	if err != nil {
		return res, err
	}
	res.xacts = after.total() - before.total()
	return res, nil
}

// redisFloor measures XADD → XREAD BLOCK on one stream with one dedicated
// reader connection: the floor under any fan-out design.
func redisFloor(ctx context.Context, rdb *redis.Client, key string, n int, every time.Duration) (benchkit.Samples, error) {
	opt := *rdb.Options()
	opt.PoolSize, opt.MinIdleConns = 1, 0
	reader := redis.NewClient(&opt)
	defer reader.Close()
	defer rdb.Del(context.WithoutCancel(ctx), key)
	if err := reader.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	lat := make(benchkit.Samples, 0, n)
	done := make(chan error, 1)
	go func() {
		cursor := "0-0" // the key is new: block until its first entry
		for len(lat) < n {
			res, err := reader.XRead(ctx, &redis.XReadArgs{Streams: []string{key, cursor}, Count: 100, Block: 5 * time.Second}).Result()
			now := time.Now()
			if err != nil {
				done <- fmt.Errorf("floor read: %w", err)
				return
			}
			for _, m := range res[0].Messages {
				cursor = m.ID
				t, _ := strconv.ParseInt(fmt.Sprint(m.Values["t"]), 10, 64)
				lat = append(lat, now.Sub(time.Unix(0, t)))
			}
		}
		done <- nil
	}()
	time.Sleep(50 * time.Millisecond) // let the reader block first
	for range n {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"t", time.Now().UnixNano()}}).Err(); err != nil {
			return nil, fmt.Errorf("floor append: %w", err)
		}
		time.Sleep(every)
	}
	select {
	case err := <-done:
		return lat, err
	case <-time.After(10 * time.Second):
		return nil, errors.New("floor: reader did not receive every entry")
	}
}
