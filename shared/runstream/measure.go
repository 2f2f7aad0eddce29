package runstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DeliveryOptions configure MeasureDelivery. Zero fields take the defaults.
type DeliveryOptions struct {
	Streams         int           // concurrent SSE clients, one run each (200)
	EventsPerStream int           // measured events per run (100)
	Interval        time.Duration // pause between two events of one run (50ms)
	IdleWindow      time.Duration // idle period in which hub reads are counted (1s)
	Verbose         bool          // full envelopes instead of the compact UI ones
}

// DeliveryStats is the result of MeasureDelivery. Latencies run from just
// before the producer's XADD to the moment the client has read the event's
// bytes off its SSE connection (append round trip included).
type DeliveryStats struct {
	Streams            int
	Events             int // measured events received
	Lost               int // measured events not received (must be 0)
	OutOfOrder         int // events received out of order or twice (must be 0)
	P50, P90, P99, Max time.Duration
	// Floor: the same clock on a bare XADD → XREAD BLOCK (one stream, one
	// dedicated connection, no hub, no HTTP), measured in the same run.
	FloorP50, FloorP99 time.Duration
	// IdleReads: XREADs the hub issued during IdleWindow with every client
	// connected and idle (at most one per Config.ReadBlock is expected).
	IdleReads  int64
	IdleWindow time.Duration
	// Reads: XREADs the hub issued while the events were produced.
	Reads int64
}

func (s DeliveryStats) String() string {
	ratio := 0.0
	if s.FloorP99 > 0 {
		ratio = float64(s.P99) / float64(s.FloorP99)
	}
	return fmt.Sprintf("streams=%d events=%d lost=%d out_of_order=%d p50=%s p90=%s p99=%s max=%s floor_p50=%s floor_p99=%s p99/floor=%.1fx hub_reads=%d idle_reads=%d/%s",
		s.Streams, s.Events, s.Lost, s.OutOfOrder, s.P50, s.P90, s.P99, s.Max,
		s.FloorP50, s.FloorP99, ratio, s.Reads, s.IdleReads, s.IdleWindow)
}

// MeasureDelivery measures event-appended → bytes-at-client latency through
// the whole path: Writer.Append → Redis → the Hub's shared XREAD → ServeRun →
// a real HTTP connection on loopback. It starts its own Hub and HTTP server,
// opens o.Streams SSE clients, warms them up, counts hub reads while they are
// idle, then appends o.EventsPerStream events per run and closes each run
// with an `end`. The measured events are `custom` ones, whose payload survives
// the compact envelope used unless o.Verbose. It deletes the run streams it
// wrote. `make bench` calls it through BenchmarkSSEDelivery; production code
// does not.
func MeasureDelivery(ctx context.Context, rdb *redis.Client, cfg Config, o DeliveryOptions) (DeliveryStats, error) {
	if o.Streams <= 0 {
		o.Streams = 200
	}
	if o.EventsPerStream <= 0 {
		o.EventsPerStream = 100
	}
	if o.Interval <= 0 {
		o.Interval = 50 * time.Millisecond
	}
	if o.IdleWindow <= 0 {
		o.IdleWindow = time.Second
	}
	cfg = cfg.withDefaults()
	st := DeliveryStats{Streams: o.Streams, IdleWindow: o.IdleWindow}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tag := "bench-" + hex.EncodeToString(b)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	floor, err := measureFloor(ctx, rdb, cfg.Prefix+tag+":floor", 300, 5*time.Millisecond)
	if err != nil {
		return st, err
	}
	st.FloorP50, st.FloorP99 = percentile(floor, 50), percentile(floor, 99)

	hub := NewHub(rdb, cfg, nil)
	hubDone := make(chan struct{})
	hctx, hcancel := context.WithCancel(ctx)
	go func() { defer close(hubDone); _ = hub.Run(hctx) }()
	defer func() { hcancel(); <-hubDone }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return st, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ServeRun(w, r, hub, RunStreamOptions{RunID: r.URL.Query().Get("run"), Verbose: o.Verbose, Heartbeat: time.Minute})
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: o.Streams, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	w := NewWriter(rdb, cfg)
	runs := make([]string, o.Streams)
	keys := make([]string, o.Streams)
	for i := range runs {
		runs[i] = fmt.Sprintf("%s-%d", tag, i)
		keys[i] = cfg.RunKey(runs[i])
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer dcancel()
		rdb.Del(dctx, keys...)
	}()

	type result struct {
		lat        []time.Duration
		received   int
		outOfOrder int
		err        error
	}
	results := make([]result, o.Streams)
	warm := make(chan struct{}, o.Streams)
	var cwg sync.WaitGroup
	defer func() { cancel(); cwg.Wait() }() // never leave a client behind
	for i := range runs {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			r := &results[i]
			r.lat = make([]time.Duration, 0, o.EventsPerStream)
			r.err = readBenchStream(ctx, client, "http://"+ln.Addr().String()+"/?run="+runs[i], func(p benchPayload) {
				if p.Warm {
					warm <- struct{}{}
					return
				}
				r.lat = append(r.lat, time.Duration(time.Now().UnixNano()-p.T))
				if p.Seq != r.received+1 {
					r.outOfOrder++
				}
				r.received++
			})
		}()
	}

	// Warm-up: every client has its subscription live and one event through.
	for _, run := range runs {
		if _, err := w.Append(ctx, run, "", EventCustom, benchPayload{Warm: true}); err != nil {
			return st, err
		}
	}
	for range runs {
		select {
		case <-warm:
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(30 * time.Second):
			return st, errors.New("measure delivery: clients did not warm up in 30s")
		}
	}

	// Let the wake-ups of the last subscriptions and the read that
	// delivered the warm-up events settle before counting.
	time.Sleep(200 * time.Millisecond)
	before := hub.Stats().Reads
	select {
	case <-time.After(o.IdleWindow):
	case <-ctx.Done():
		return st, ctx.Err()
	}
	st.IdleReads = hub.Stats().Reads - before
	before = hub.Stats().Reads

	var pwg sync.WaitGroup
	perr := make(chan error, o.Streams)
	for i, run := range runs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			// Spread the producers over one interval.
			time.Sleep(time.Duration(i) * o.Interval / time.Duration(o.Streams))
			for seq := 1; seq <= o.EventsPerStream; seq++ {
				if _, err := w.Append(ctx, run, "", EventCustom, benchPayload{Seq: seq, T: time.Now().UnixNano()}); err != nil {
					perr <- err
					return
				}
				time.Sleep(o.Interval)
			}
			if _, _, err := w.AppendOnce(ctx, run, "", "end", EventEnd, map[string]string{"status": "completed"}); err != nil {
				perr <- err
			}
		}()
	}
	pwg.Wait()
	st.Reads = hub.Stats().Reads - before
	close(perr)
	if err := <-perr; err != nil {
		return st, fmt.Errorf("measure delivery: append: %w", err)
	}

	done := make(chan struct{})
	go func() { cwg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
	}

	var all []time.Duration
	var firstErr error
	for _, r := range results {
		all = append(all, r.lat...)
		st.Lost += o.EventsPerStream - r.received
		st.OutOfOrder += r.outOfOrder
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	st.Events = len(all)
	slices.Sort(all)
	st.P50, st.P90, st.P99 = percentile(all, 50), percentile(all, 90), percentile(all, 99)
	if len(all) > 0 {
		st.Max = all[len(all)-1]
	}
	if firstErr != nil {
		return st, fmt.Errorf("measure delivery: client: %w", firstErr)
	}
	return st, nil
}

type benchPayload struct {
	Seq  int   `json:"seq"`
	T    int64 `json:"t"`
	Warm bool  `json:"warm,omitempty"`
}

// readBenchStream reads one SSE response until its `end` event and calls
// onEvent with the payload of every other event.
func readBenchStream(ctx context.Context, client *http.Client, url string, onEvent func(benchPayload)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("stream ended before end: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			if event == EventEnd {
				return nil
			}
			var env struct {
				Payload benchPayload `json:"payload"`
			}
			if err := json.Unmarshal(line[len("data: "):], &env); err != nil {
				return fmt.Errorf("decode event: %w", err)
			}
			onEvent(env.Payload)
		case len(line) == 0:
			event = ""
		}
	}
}

// measureFloor measures XADD → XREAD BLOCK latency on one stream with one
// dedicated reader connection: the floor under any fan-out design.
func measureFloor(ctx context.Context, rdb *redis.Client, key string, n int, every time.Duration) ([]time.Duration, error) {
	reader := newBlockingClient(rdb, 5*time.Second)
	defer reader.Close()
	defer rdb.Del(context.WithoutCancel(ctx), key)
	lat := make([]time.Duration, 0, n)
	readErr := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		cursor := "0-0"
		close(ready)
		for len(lat) < n {
			res, err := reader.XRead(ctx, &redis.XReadArgs{Streams: []string{key, cursor}, Count: 200, Block: 5 * time.Second}).Result()
			if err != nil {
				readErr <- fmt.Errorf("floor read: %w", err)
				return
			}
			now := time.Now().UnixNano()
			for _, m := range res[0].Messages {
				cursor = m.ID
				var t int64
				if s, ok := m.Values["t"].(string); ok {
					_, _ = fmt.Sscan(s, &t)
				}
				lat = append(lat, time.Duration(now-t))
			}
		}
		readErr <- nil
	}()
	<-ready
	for range n {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"t", time.Now().UnixNano()}}).Err(); err != nil {
			return nil, fmt.Errorf("floor append: %w", err)
		}
		time.Sleep(every)
	}
	if err := <-readErr; err != nil {
		return nil, err
	}
	slices.Sort(lat)
	return lat, nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[min(i, len(sorted)-1)]
}
