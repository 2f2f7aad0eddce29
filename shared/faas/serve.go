package faas

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Runtimes Serve can run under.
const (
	RuntimeHTTP   = "http"   // a plain HTTP server: local, Knative, Cloud Run services, any broker
	RuntimeLambda = "lambda" // the AWS Lambda runtime API
	RuntimeGCF    = "gcf"    // functions-framework-go (Cloud Run functions)
)

// ServeOptions says what a function main serves and where.
type ServeOptions struct {
	// Runtime is RuntimeHTTP (the default when empty), RuntimeLambda or
	// RuntimeGCF; see DetectRuntime.
	Runtime string
	// Addr is the listen address for RuntimeHTTP and RuntimeGCF; default ":8080".
	// RuntimeHTTP accepts port 0 (OnReady gets the bound address).
	Addr string
	// Router serves event functions; HTTP serves the intake. When both are
	// set, HTTP is served.
	Router *Router
	HTTP   http.Handler
	// OnReady, when set, is called once the function can take requests: after
	// the listener is bound (RuntimeHTTP, RuntimeGCF) or just before entering
	// the runtime loop (RuntimeLambda, with addr ""). Mains print a ready line
	// with it; tests and benchmarks measure cold start with it.
	OnReady func(addr string)
	// ShutdownTimeout bounds the graceful drain of RuntimeHTTP after ctx ends;
	// default 10s (Cloud Run's grace period).
	ShutdownTimeout time.Duration
}

// DetectRuntime picks the runtime from the environment, read only through
// getenv: YUXI_RUNTIME when set; else "lambda" when AWS_LAMBDA_RUNTIME_API is
// set (the Lambda runtime sets it); else "gcf" when FUNCTION_TARGET is set
// (Cloud Run functions set it); else "http".
func DetectRuntime(getenv func(string) string) string {
	if rt := strings.ToLower(strings.TrimSpace(getenv("YUXI_RUNTIME"))); rt != "" {
		return rt
	}
	if getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		return RuntimeLambda
	}
	if getenv("FUNCTION_TARGET") != "" {
		return RuntimeGCF
	}
	return RuntimeHTTP
}

// Serve runs the function under the chosen runtime until ctx ends.
//
// RuntimeHTTP serves o.HTTP, or NewHTTPReceiver(o.Router), and on ctx's end
// stops accepting and drains in-flight requests (bounded by ShutdownTimeout);
// handlers keep ctx's values but not its cancellation, so draining work is not
// cut short. RuntimeLambda never returns (see serveLambda). RuntimeGCF: see
// serveFunctionsFramework.
func Serve(ctx context.Context, o ServeOptions) error {
	if o.Router == nil && o.HTTP == nil {
		return errors.New("serve: neither a router nor an HTTP handler to serve")
	}
	addr := o.Addr
	if addr == "" {
		addr = ":8080"
	}
	switch o.Runtime {
	case "", RuntimeHTTP:
		h := o.HTTP
		if h == nil {
			h = NewHTTPReceiver(o.Router)
		}
		return serveHTTP(ctx, addr, h, o.OnReady, o.ShutdownTimeout)
	case RuntimeLambda:
		if o.OnReady != nil {
			o.OnReady("")
		}
		serveLambda(ctx, o.Router, o.HTTP)
		return errors.New("serve: lambda runtime loop returned")
	case RuntimeGCF:
		return serveFunctionsFramework(ctx, addr, o.Router, o.HTTP, o.OnReady)
	}
	return fmt.Errorf("serve: unknown runtime %q (want %s, %s or %s)", o.Runtime, RuntimeHTTP, RuntimeLambda, RuntimeGCF)
}

func serveHTTP(ctx context.Context, addr string, h http.Handler, onReady func(string), drain time.Duration) error {
	if drain <= 0 {
		drain = 10 * time.Second
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: listen %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if onReady != nil {
		onReady(ln.Addr().String())
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
