// Command fakellm serves the scripted OpenAI-compatible provider of package
// llmtest as a standalone process, for multi-process tests and benchmarks:
//
//	fakellm -addr 127.0.0.1:8089 -script script.json
//
// then point a provider at it, e.g. YUXI_PROVIDER_FAKE_BASE_URL=http://127.0.0.1:8089/v1
// and YUXI_DEFAULT_MODEL=fake:any-model. The script format is documented on
// llmtest.Script; testdata/example.json is a complete example. Without
// -script every request is answered by echoing its last user message.
// Out-of-contract requests are answered 422 and logged to stderr.
//
// Imported by: nobody (a command). May import: shared/llm/llmtest and
// the standard library.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], nil); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. ready, when not nil, is told the listening
// address once requests can be sent.
func run(ctx context.Context, args []string, ready func(addr string)) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address")
	scriptPath := fs.String("script", "", "JSON script file (see llmtest.Script); empty: echo the last user message")
	if err := fs.Parse(args); err != nil {
		return err
	}
	script := &llmtest.Script{After: "cycle", Replies: []llmtest.ScriptReply{{Echo: true}}}
	if *scriptPath != "" {
		data, err := os.ReadFile(*scriptPath)
		if err != nil {
			return err
		}
		if script, err = llmtest.ParseScript(data); err != nil {
			return err
		}
	}
	logger := log.New(os.Stderr, "fakellm: ", log.LstdFlags)
	fake := llmtest.New(func(msg string) { logger.Print(msg) })
	fake.Handle(script.Handler())

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	logger.Printf("serving http://%s/v1", ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fake.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
