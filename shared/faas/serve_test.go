package faas_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func TestDetectRuntime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{nil, faas.RuntimeHTTP},
		{map[string]string{"K_SERVICE": "agent-step", "PORT": "8080"}, faas.RuntimeHTTP}, // Knative, Cloud Run services
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, faas.RuntimeLambda},
		{map[string]string{"FUNCTION_TARGET": "AgentStep", "K_SERVICE": "agent-step"}, faas.RuntimeGCF},
		{map[string]string{"YUXI_RUNTIME": "http", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, faas.RuntimeHTTP},
		{map[string]string{"YUXI_RUNTIME": " GCF ", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, faas.RuntimeGCF},
		{map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "FUNCTION_TARGET": "x"}, faas.RuntimeLambda},
	}
	for _, tc := range cases {
		if got := faas.DetectRuntime(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("DetectRuntime(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// serveHTTP starts Serve on a free port and returns its base URL and a
// function that stops it and returns Serve's error.
func serveHTTP(t *testing.T, o faas.ServeOptions) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	o.Addr = "127.0.0.1:0"
	o.OnReady = func(addr string) { ready <- addr }
	served := make(chan error, 1)
	go func() { served <- faas.Serve(ctx, o) }()
	select {
	case addr := <-ready:
		return "http://" + addr, func() error { cancel(); return <-served }
	case err := <-served:
		cancel()
		t.Fatalf("Serve returned before it was ready: %v", err)
	}
	return "", nil
}

func TestServeRouterOverHTTP(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	base, stop := serveHTTP(t, faas.ServeOptions{Router: fn.router})

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	if err := faas.NewHTTPSender(base, nil).Send(t.Context(), stepEvent(t, "ev-1", "run_ok")); err != nil {
		t.Fatalf("send: %v", err)
	}
	if got := fn.called(); len(got) != 1 || got[0] != "run_ok" {
		t.Fatalf("handler calls = %v", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeHTTPHandler(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "intake") })
	base, stop := serveHTTP(t, faas.ServeOptions{HTTP: h, Router: newScripted(t).router})
	resp, err := http.Get(base + "/api/threads")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "intake" {
		t.Fatalf("body = %q, want the HTTP handler's", b)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// When ctx ends, Serve stops accepting but lets in-flight deliveries finish,
// and their context is not cancelled by the shutdown.
func TestServeDrainsInFlight(t *testing.T) {
	t.Parallel()
	fn := newScripted(t)
	base, stop := serveHTTP(t, faas.ServeOptions{Router: fn.router})

	sent := make(chan error, 1)
	go func() {
		sent <- faas.NewHTTPSender(base, nil).Send(context.Background(), stepEvent(t, "ev-block", "run_block"))
	}()
	<-fn.started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	// Wait until the listener is closed (new connections fail) while the
	// delivery is still blocked: only then does its success show a drain.
	// The server announces this nowhere, so poll.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		resp, err := fresh.Get(base + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("Serve kept accepting connections after ctx ended")
		}
	}

	close(fn.release)
	if err := <-fn.blocked; err != nil {
		t.Errorf("handler context ended with the server: %v", err)
	}
	if err := <-sent; err != nil {
		t.Errorf("in-flight delivery: %v, want it acknowledged", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeRejectsBadOptions(t *testing.T) {
	t.Parallel()
	r := newScripted(t).router
	for _, o := range []faas.ServeOptions{
		{},                          // nothing to serve
		{Runtime: "k8s", Router: r}, // unknown runtime
		{Runtime: faas.RuntimeGCF, Router: r, Addr: "127.0.0.1:0"}, // the framework needs a fixed port
		{Runtime: faas.RuntimeHTTP, Router: r, Addr: "not an address"},
	} {
		if err := faas.Serve(t.Context(), o); err == nil {
			t.Errorf("Serve(%+v) = nil, want an error", o)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("Serve(%+v): empty error", o)
		}
	}
}
