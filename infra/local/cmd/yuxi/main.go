// Command yuxi runs the whole platform in one process on the embedded
// defaults (PostgreSQL + Redis): `make run`.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "yuxi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, environ []string) error {
	cfg, err := bootstrap.Load(getenv, environ, "5050")
	if err != nil {
		return err
	}
	if getenv("YUXI_CREATE_DATABASE") == "" {
		cfg.CreateDatabase = true // a fresh machine has the server but not the database
	}
	if cfg.EncryptionKey == "" && cfg.EncryptionKeyFile == "" {
		cfg.EncryptionKeyFile = ".yuxi/encryption.key" // generated on first start, next to the objects; never in the database
	}
	p, err := local.New(ctx, cfg)
	if err != nil {
		return err
	}
	return p.Run(ctx, ":"+cfg.Port, func(a net.Addr) {
		fmt.Fprintf(os.Stderr, "yuxi: ready, API on http://%s (all functions in one process)\n", a)
	})
}
