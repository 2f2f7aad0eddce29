package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 12: the OpenAI-compatible stream against the run SSE of the same
// run. Each run has two clients — POST /v1/chat/completions stream:true
// (which created the run) and GET /api/agent/runs/{id}/events — and the
// bench appends the model's text deltas to the run's stream itself; the
// latency of a delta is from just before its append to the line carrying it
// at each client. The run SSE is the floor: /v1 is the same stream re-encoded
// as chat.completion.chunk events.
const (
	oaRuns     = 20
	oaDeltas   = 40 // measured deltas per run; the first is the time to first chunk
	oaInterval = 25 * time.Millisecond
	oaTarget   = 1.2
)

// oaRun is one run's two clients' arrivals, by delta sequence number.
type oaRun struct {
	id       string
	mu       sync.Mutex
	sent     [oaDeltas + 1]time.Time
	v1, sse  [oaDeltas + 1]time.Time
	warmV1   chan struct{}
	warmSSE  chan struct{}
	warmOnce [2]sync.Once
}

func (o *oaRun) arrive(v1 bool, content string, at time.Time) {
	for _, part := range strings.Split(content, ";") {
		if part == "" {
			continue
		}
		if part == "warm" {
			if v1 {
				o.warmOnce[0].Do(func() { close(o.warmV1) })
			} else {
				o.warmOnce[1].Do(func() { close(o.warmSSE) })
			}
			continue
		}
		seq, err := strconv.Atoi(part)
		if err != nil || seq < 1 || seq > oaDeltas {
			continue
		}
		o.mu.Lock()
		if v1 {
			o.v1[seq] = at
		} else {
			o.sse[seq] = at
		}
		o.mu.Unlock()
	}
}

func figOpenAI(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[12] OpenAI-compatible stream vs the run SSE of the same run",
		"intake as its own process; per run one POST /v1/chat/completions stream:true client (which created the run) and one GET /api/agent/runs/{id}/events client; "+
			"the bench appends text deltas to the run's stream with runstream.Writer (20 runs, 40 deltas each, one per 25ms per run); "+
			"latency = just before the append → the data line read by the client; floor: the run SSE client of the same run")
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * oaRuns, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	e.Progress("figure 12: opening %d /v1 streams and their run SSE clients", oaRuns)
	runs := make([]*oaRun, oaRuns)
	var wg sync.WaitGroup
	errs := make(chan error, 2*oaRuns)
	for i := range runs {
		o := &oaRun{warmV1: make(chan struct{}), warmSSE: make(chan struct{})}
		runs[i] = o
		resp, err := in.api.v1Stream(ctx, hc)
		if err != nil {
			return err
		}
		o.id = resp.Header.Get("X-Yuxi-Run-Id")
		if o.id == "" {
			resp.Body.Close()
			return errors.New("the /v1 stream named no run (X-Yuxi-Run-Id)")
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := readChunks(ctx, resp.Body, func(content string, at time.Time) { o.arrive(true, content, at) }); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
		connected := make(chan error, 1)
		go func() {
			defer wg.Done()
			err := in.api.readStream(ctx, hc, o.id, connected, func(ev sseEvent) {
				if ev.Event != runstream.EventMessages {
					return
				}
				var env struct {
					Payload struct {
						Items []struct {
							StreamEvent struct {
								Content string `json:"content"`
							} `json:"stream_event"`
						} `json:"items"`
					} `json:"payload"`
				}
				if json.Unmarshal(ev.Data, &env) != nil {
					return
				}
				for _, it := range env.Payload.Items {
					o.arrive(false, it.StreamEvent.Content, ev.At)
				}
			})
			if err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
		if err := <-connected; err != nil {
			return err
		}
	}
	defer func() { cancel(); wg.Wait() }()

	w := runstream.NewWriter(e.Redis, runstream.Config{Prefix: prefix})
	delta := func(id, text string) error {
		chunk, _ := json.Marshal(runstream.MessageChunk{Status: runstream.ChunkLoading, Response: &text,
			StreamEvent: runstream.MessageDelta{Type: runstream.StreamMessageDelta, Content: text, MessageID: id + ":1:1:bench"}})
		_, err := w.Append(ctx, id, "", runstream.EventMessages, runstream.Messages{Items: []json.RawMessage{chunk}})
		return err
	}
	for _, o := range runs {
		if err := delta(o.id, "warm;"); err != nil {
			return err
		}
	}
	for _, o := range runs {
		for _, c := range []chan struct{}{o.warmV1, o.warmSSE} {
			select {
			case <-c:
			case err := <-errs:
				return err
			case <-time.After(30 * time.Second):
				return errors.New("a client did not receive the warm-up delta within 30s")
			}
		}
	}

	e.Progress("figure 12: %d deltas on each of %d runs", oaDeltas, oaRuns)
	var pwg sync.WaitGroup
	perrs := make(chan error, oaRuns)
	for i, o := range runs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			time.Sleep(time.Duration(i) * oaInterval / oaRuns)
			for seq := 1; seq <= oaDeltas; seq++ {
				o.mu.Lock()
				o.sent[seq] = time.Now()
				o.mu.Unlock()
				if err := delta(o.id, strconv.Itoa(seq)+";"); err != nil {
					perrs <- err
					return
				}
				time.Sleep(oaInterval)
			}
		}()
	}
	pwg.Wait()
	close(perrs)
	if err := <-perrs; err != nil {
		return err
	}
	complete := func() bool {
		for _, o := range runs {
			o.mu.Lock()
			done := !o.v1[oaDeltas].IsZero() && !o.sse[oaDeltas].IsZero()
			o.mu.Unlock()
			if !done {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !complete() && time.Now().Before(deadline); {
		select {
		case err := <-errs:
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
	var firstV1, firstSSE, v1, sse benchkit.Samples
	missing := 0
	for _, o := range runs {
		o.mu.Lock()
		for seq := 1; seq <= oaDeltas; seq++ {
			if o.v1[seq].IsZero() || o.sse[seq].IsZero() {
				missing++
				continue
			}
			a, b := o.v1[seq].Sub(o.sent[seq]), o.sse[seq].Sub(o.sent[seq])
			if seq == 1 {
				firstV1, firstSSE = append(firstV1, a), append(firstSSE, b)
				continue
			}
			v1, sse = append(v1, a), append(sse, b)
		}
		o.mu.Unlock()
	}
	if len(v1) == 0 {
		return errors.New("no delta reached both clients")
	}
	line := func(name string, a, b time.Duration) {
		ratio := benchkit.DurRatio(a, b)
		r.Line(name, benchkit.Ms(a), benchkit.X(ratio)+" vs run SSE "+benchkit.Ms(b), fmt.Sprintf("≤ %.1f×", oaTarget), ratio <= oaTarget)
	}
	line("openai_first_chunk_p50", firstV1.P50(), firstSSE.P50())
	line("openai_chunk_p50", v1.P50(), sse.P50())
	line("openai_chunk_p99", v1.P99(), sse.P99())
	r.Detail("first chunk p99 %s vs %s; per-chunk max %s vs %s; %d deltas measured on each client, %d missing",
		benchkit.Ms(firstV1.P99()), benchkit.Ms(firstSSE.P99()), benchkit.Ms(v1.Pct(100)), benchkit.Ms(sse.Pct(100)), len(v1)+len(firstV1), missing)
	for _, o := range runs { // end the runs' streams so that both clients close
		_, _ = w.Append(ctx, o.id, "", runstream.EventEnd, runstream.End{Status: "completed"})
	}
	return nil
}

// v1Stream starts a streamed completion (a fresh thread, so a new run) and
// returns the response once its headers arrived.
func (a *api) v1Stream(ctx context.Context, hc *http.Client) (*http.Response, error) {
	body := `{"model":"default-chatbot","stream":true,"messages":[{"role":"user","content":"bench"}]}`
	req, err := http.NewRequestWithContext(ctx, "POST", a.base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("POST /v1/chat/completions: status %d: %s", resp.StatusCode, b)
	}
	return resp, nil
}

// readChunks reads chat.completion.chunk events until [DONE] or an error,
// calling onContent with each delta's content and the time its line was read.
func readChunks(ctx context.Context, body io.ReadCloser, onContent func(string, time.Time)) error {
	defer body.Close()
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("/v1 stream: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			return nil
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				onContent(c.Delta.Content, at)
			}
		}
	}
}
