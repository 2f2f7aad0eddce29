// Command gcffn is a test function for shared/faas's functions-framework-go
// test (gcf_process_test.go); it is built by that test and is not part of
// ./... (testdata). With FUNCTION_TARGET set it serves through
// functions-framework-go on PORT. Its StepReady handler does what the run id
// says: run_retry* fails transiently, run_perm* fails permanently, anything
// else is acknowledged. It prints "handled <run id>" and "recorded <event id>"
// lines on stdout.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	out := &lineWriter{w: stdout}
	r := faas.NewRouter("gcffn", recorder{out}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	faas.On(r, func(ctx context.Context, in events.StepReady) error {
		switch {
		case strings.HasPrefix(in.RunID, "run_retry"):
			return errors.New("transient failure")
		case strings.HasPrefix(in.RunID, "run_perm"):
			return faas.Permanent(errors.New("step refused"))
		}
		out.printf("handled %s\n", in.RunID)
		return nil
	})
	return faas.Serve(ctx, faas.ServeOptions{
		Runtime: faas.DetectRuntime(getenv),
		Addr:    ":" + getenv("PORT"),
		Router:  r,
		OnReady: func(addr string) { out.printf("ready %s\n", addr) },
	})
}

type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

type recorder struct{ out *lineWriter }

func (r recorder) RecordFailure(_ context.Context, ev cloudevents.Event, _ string, _ error) error {
	r.out.printf("recorded %s\n", ev.ID())
	return nil
}
