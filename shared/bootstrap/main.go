package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// Served is what a function's wiring hands back to Main: the event router
// of an event function, or the HTTP handler of intake.
type Served struct {
	Router *faas.Router
	HTTP   http.Handler
}

// Main is the whole of a function's main: it reads the process's
// environment (Load), opens the core (outbox delivered synchronously on the
// runtimes that freeze between requests), lets wire build the function's
// handlers, relays the outbox in the background and serves until SIGINT or
// SIGTERM. A failure is printed as "<function>: <error>" and exits 1.
func Main(function string, wire func(ctx context.Context, cfg Config, core *Core) (Served, error)) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serve(ctx, function, os.Getenv, os.Environ(), wire)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, function+":", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, function string, getenv func(string) string, environ []string,
	wire func(ctx context.Context, cfg Config, core *Core) (Served, error)) error {
	cfg, err := Load(getenv, environ, "8080")
	if err != nil {
		return err
	}
	rt := faas.DetectRuntime(getenv)
	core, err := OpenCore(ctx, cfg, Options{Function: function, Sync: rt != faas.RuntimeHTTP})
	if err != nil {
		return err
	}
	defer core.Close()
	s, err := wire(ctx, cfg, core)
	if err != nil {
		return err
	}
	go core.Relay.Run(ctx) //nolint:errcheck // ends with ctx
	return faas.Serve(ctx, faas.ServeOptions{Runtime: rt, Addr: ":" + cfg.Port, Router: s.Router, HTTP: s.HTTP, OnReady: Ready(function)})
}
