package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// intake is the intake function running as its own process (the binary
// built at start) on a bench database, publishing its events to a sink in
// the bench process that accepts them and does nothing else: no dispatcher
// or agent-step runs, so every submitted run stays pending and its event
// stream stays open.
type intake struct {
	proc *proc
	sink *sink
	api  *api
}

// startIntake starts the intake on db and prefix and signs in the first admin.
// extra adds to (or overrides) the process's environment.
func (e *env) startIntake(ctx context.Context, db benchkit.DB, prefix string, extra ...map[string]string) (*intake, error) {
	s, err := startSink()
	if err != nil {
		return nil, err
	}
	penv := e.platformEnv(db, prefix)
	for _, m := range extra {
		for k, v := range m {
			penv[k] = v
		}
	}
	penv["PORT"] = "0"
	penv["K_SINK"] = s.url
	p, err := startProc(e.bins["intake"], penv, 30*time.Second, nil)
	if err != nil {
		s.close()
		return nil, err
	}
	port, err := p.Port()
	if err != nil {
		p.kill()
		s.close()
		return nil, err
	}
	in := &intake{proc: p, sink: s, api: newAPI(fmt.Sprintf("http://127.0.0.1:%d", port), 64)}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := in.api.call(ctx, "POST", "/api/auth/initialize", map[string]string{"uid": "bench", "password": "bench-password"}, &tok); err != nil {
		in.stop()
		return nil, err
	}
	in.api.token = tok.AccessToken
	return in, nil
}

func (in *intake) stop() {
	in.proc.stop()
	in.sink.close()
	in.api.hc.CloseIdleConnections()
}

// sink accepts CloudEvents (202) and counts them.
type sink struct {
	url    string
	srv    *http.Server
	events atomic.Int64
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String() + "/"}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.events.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) close() { _ = s.srv.Close() }

// api calls the platform's HTTP API with a bearer token.
type api struct {
	base  string
	token string
	hc    *http.Client
}

func newAPI(base string, conns int) *api {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute, DisableCompression: true}
	return &api{base: base, hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// call sends a JSON request and decodes a 200 answer into out (when not nil).
func (a *api) call(ctx context.Context, method, path string, body, out any) error {
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rdr)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode %s: %w", method, path, b, err)
		}
	}
	return nil
}

// thread creates a thread with the built-in agent.
func (a *api) thread(ctx context.Context) (string, error) {
	var t struct {
		ID string `json:"id"`
	}
	err := a.call(ctx, "POST", "/api/chat/thread", map[string]string{"agent_id": "default-chatbot"}, &t)
	return t.ID, err
}

// submit posts a message to threadID and returns the dispatched run's id.
func (a *api) submit(ctx context.Context, threadID string) (string, error) {
	var out struct {
		Status string  `json:"status"`
		RunID  *string `json:"run_id"`
	}
	if err := a.call(ctx, "POST", "/api/agent/runs", map[string]string{
		"query": "hello", "agent_slug": "default-chatbot", "thread_id": threadID}, &out); err != nil {
		return "", err
	}
	if out.Status != "dispatched" || out.RunID == nil {
		return "", fmt.Errorf("submit on thread %s: status %q, want dispatched", threadID, out.Status)
	}
	return *out.RunID, nil
}

// threads creates n threads with a few concurrent requests.
func (a *api) threads(ctx context.Context, n int) ([]string, error) {
	out := make([]string, n)
	_, err := benchkit.Concurrently(ctx, 8, (n+7)/8, func(ctx context.Context, w, i int) (time.Duration, error) {
		k := w*((n+7)/8) + i
		if k >= n {
			return 0, nil
		}
		id, err := a.thread(ctx)
		out[k] = id
		return 0, err
	})
	return out, err
}

// openRuns creates n threads and submits one message on each: n pending
// runs whose streams stay open.
func (a *api) openRuns(ctx context.Context, n int) ([]string, error) {
	threads, err := a.threads(ctx, n)
	if err != nil {
		return nil, err
	}
	runs := make([]string, n)
	_, err = benchkit.Concurrently(ctx, 8, (n+7)/8, func(ctx context.Context, w, i int) (time.Duration, error) {
		k := w*((n+7)/8) + i
		if k >= n {
			return 0, nil
		}
		id, err := a.submit(ctx, threads[k])
		runs[k] = id
		return 0, err
	})
	return runs, err
}

// sseEvent is one server-sent event as read by a client; At is when the
// line carrying its data was read off the connection.
type sseEvent struct {
	Event string
	Data  []byte
	At    time.Time
}

// streams are SSE clients, one per run, on connections of their own.
type streams struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	hc     *http.Client
	mu     sync.Mutex
	errs   []error
}

// openStreams connects one SSE client per run to GET
// /api/agent/runs/{id}/events and returns once every client has its 200
// response headers. onEvent (may be nil) is called from the client's
// goroutine for every event; clients end when close is called.
func (a *api) openStreams(ctx context.Context, runs []string, onEvent func(client int, ev sseEvent)) (*streams, error) {
	ctx, cancel := context.WithCancel(ctx)
	tr := &http.Transport{MaxIdleConnsPerHost: len(runs), DisableCompression: true}
	s := &streams{cancel: cancel, hc: &http.Client{Transport: tr}}
	connected := make(chan error, len(runs))
	for i, runID := range runs {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			err := a.readStream(ctx, s.hc, runID, connected, func(ev sseEvent) {
				if onEvent != nil {
					onEvent(i, ev)
				}
			})
			if err != nil && ctx.Err() == nil {
				s.mu.Lock()
				s.errs = append(s.errs, err)
				s.mu.Unlock()
			}
		}()
	}
	timeout := time.After(30 * time.Second)
	for range runs {
		select {
		case err := <-connected:
			if err != nil {
				s.close()
				return nil, err
			}
		case <-timeout:
			s.close()
			return nil, errors.New("SSE clients not connected after 30s")
		}
	}
	return s, nil
}

// err is the first error of a client that ended on its own.
func (s *streams) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) > 0 {
		return fmt.Errorf("%d SSE clients failed, first: %w", len(s.errs), s.errs[0])
	}
	return nil
}

func (s *streams) close() {
	s.cancel()
	s.wg.Wait()
	s.hc.CloseIdleConnections()
}

// readStream reads one run's SSE response until ctx ends or the stream
// ends, reporting on connected once (nil on 200 headers).
func (a *api) readStream(ctx context.Context, hc *http.Client, runID string, connected chan<- error, onEvent func(sseEvent)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", a.base+"/api/agent/runs/"+runID+"/events", nil)
	if err != nil {
		connected <- err
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		connected <- err
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		err := fmt.Errorf("stream of run %s: status %d: %s", runID, resp.StatusCode, b)
		connected <- err
		return err
	}
	connected <- nil
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("stream of run %s: %w", runID, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			onEvent(sseEvent{Event: event, Data: line[len("data: "):], At: at})
			if event == "end" {
				return nil
			}
		case len(line) == 0:
			event = ""
		}
	}
}
