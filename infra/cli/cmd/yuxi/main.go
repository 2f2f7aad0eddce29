// Command yuxi is the platform's command line (infra/cli): remotes, login
// with an API key, whoami, status, and knowledge-base list, query and
// upload. Install it with
// `go install github.com/yuxi-serverless/yuxi/infra/cli/cmd/yuxi@latest`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/infra/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	home, err := os.UserHomeDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "yuxi: no home directory:", err)
		os.Exit(1)
	}
	code := cli.Run(ctx, os.Args[1:], cli.Env{Home: home, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
