package faas

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// functionsFrameworkUsed guards the framework's process-wide registry: a
// second registration at "/" would make its ServeMux panic.
var functionsFrameworkUsed atomic.Bool

// serveFunctionsFramework serves under functions-framework-go, as Google Cloud
// Run functions run Go: h as an HTTP function if it is set, otherwise r as a
// CloudEvent function (Eventarc, Pub/Sub push). addr is host:port; the port
// must be fixed (Cloud Run passes it in PORT).
//
// For CloudEvents, Retry returns the handler's error, which the framework
// answers with 500 so Eventarc redelivers; Ack, Failed and Malformed return
// nil (200): permanent failures are recorded by the router, and Eventarc
// would retry any non-2xx (when recording fails, the error is returned so the
// event comes back). An Eventarc Pub/Sub trigger's messagePublished
// event is unwrapped by the router, which delivers the Yuxi event inside (or
// records why it could not); so is a plain Pub/Sub push, which the framework
// itself turns into messagePublished when the push endpoint's path names the
// topic (…/projects/P/topics/T). Events that are not valid CloudEvents are refused
// with 400 by the framework before the router sees them.
//
// functions-framework-go keeps registered functions in a package-level
// registry and reads FUNCTION_TARGET, K_SERVICE and CLOUD_RUN_TIMEOUT_SECONDS
// from the process environment itself. This function is the only place that
// touches the framework, and it may be called once per process; a second call
// returns an error. The framework cannot stop its server, so when ctx ends
// this returns nil and the listener lives until the process exits (Cloud Run
// stops the instance with SIGTERM and then SIGKILL anyway). onReady, when
// set, is told the address once the server listens.
func serveFunctionsFramework(ctx context.Context, addr string, r *Router, h http.Handler, onReady func(string)) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("functions framework address %q: %w", addr, err)
	}
	if port == "" || port == "0" {
		return fmt.Errorf("functions framework address %q: needs a fixed port", addr)
	}
	if r == nil && h == nil {
		return errors.New("functions framework: neither a router nor an HTTP handler to serve")
	}
	if !functionsFrameworkUsed.CompareAndSwap(false, true) {
		return errors.New("functions framework: already started in this process (its registry is process-wide)")
	}
	// Registered by path, not by name, so the framework serves it at "/"
	// whatever FUNCTION_TARGET says.
	if h != nil {
		err = funcframework.RegisterHTTPFunctionContext(ctx, "/", h.ServeHTTP)
	} else {
		err = funcframework.RegisterCloudEventFunctionContext(ctx, "/", cloudEventFunction(r))
	}
	if err != nil {
		return fmt.Errorf("functions framework: register: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- funcframework.StartHostPort(host, port) }()
	if onReady != nil {
		if err := awaitListening(ctx, net.JoinHostPort(dialHost(host), port), served); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		onReady(net.JoinHostPort(host, port))
	}
	select {
	case err := <-served:
		return fmt.Errorf("functions framework: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// cloudEventFunction maps router outcomes to the framework's error contract.
func cloudEventFunction(r *Router) func(ctx context.Context, ev cloudevents.Event) error {
	return func(ctx context.Context, ev cloudevents.Event) error {
		res := r.Deliver(ctx, ev)
		if res.Outcome == Retry || (res.Outcome != Ack && unrecorded(res.Err)) {
			return fmt.Errorf("event %s: %w", ev.ID(), res.Err)
		}
		return nil
	}
}

func dialHost(host string) string {
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "127.0.0.1"
	}
	return host
}

// awaitListening waits until addr accepts connections. The framework binds
// its listener inside StartHostPort and tells nobody, so readiness can only be
// observed from outside: dial until it answers, the server fails, or ctx ends.
func awaitListening(ctx context.Context, addr string, served <-chan error) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case err := <-served:
			return fmt.Errorf("functions framework: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
