package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/logring"
	"github.com/yuxi-serverless/yuxi/shared/modelprovider"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/secret"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
)

// Core is what every function opens: the logger, the migrated Postgres pool,
// Redis with the run-stream writer, the outbox with its relay, and the model
// providers. The other openers (chat.Open, knowledge.Open and parser.Open, in
// the packages under this one) take it and add only what their callers use.
type Core struct {
	Config Config
	Log    *slog.Logger
	// Logs are this process's last log lines (GET /api/system/logs).
	Logs   *logring.Ring
	Pool   *pgxpool.Pool
	Redis  *redis.Client
	Stream *runstream.Writer
	Relay  *outbox.Relay
	Outbox *outbox.Outbox
	// Models are the environment's model providers (chat, embedding and
	// rerank models).
	Models *llm.Registry
	// Providers resolve chat model specs against Models and the providers
	// managed through the API (shared/modelprovider; environment first).
	Providers *modelprovider.Store
	// Failures records permanent event failures (the routers' recorder).
	Failures outbox.FailureStore
	// Secrets seals secrets at rest (nil when no key is configured: storing
	// one then answers 503 encryption_key_missing).
	Secrets *secret.Keyring
	// Telemetry records spans and RED metrics (nil when
	// OTEL_EXPORTER_OTLP_ENDPOINT is unset: off).
	Telemetry *telemetry.Telemetry

	sync bool // publish and flush before an invocation returns (Lambda, GCF)

	closers []func() // of the openers built on this core, run first by Close
}

// Options choose how the process publishes events.
type Options struct {
	// Function names the process in event sources ("/yuxi/<function>").
	Function string
	// Publisher overrides the relay's publisher (the local runner passes its
	// in-process bus). When nil, Config.Relay chooses (relay.go).
	Publisher outbox.Publisher
	// Sync publishes before returning from the producing call (Lambda, GCF).
	Sync bool
	// Lanes bounds the in-process handling of some event types (see
	// outbox.RelayConfig.Lanes); the local runner sets it.
	Lanes map[string]int
}

// Logger builds the process logger.
func Logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// OpenCore loads the model providers, connects to Postgres (creating the
// database when cfg.CreateDatabase, then migrating it) and Redis, and builds
// the outbox and its relay. The caller runs Relay.Run and calls Close.
func OpenCore(ctx context.Context, cfg Config, opt Options) (*Core, error) {
	logs := logring.New(1000)
	log := slog.New(logs.Tee(Logger(cfg.LogLevel).Handler())).With("function", opt.Function)
	// Providers come from cfg.Environ (YUXI_PROVIDER_*, *_API_KEY, YUXI_DEFAULT_MODEL).
	models, err := llm.LoadRegistry(cfg.Environ, &http.Client{Transport: http.DefaultTransport})
	if err != nil {
		return nil, fmt.Errorf("model providers: %w", err)
	}
	secrets, err := cfg.Keyring()
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	if cfg.CreateDatabase {
		if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}
	pool, err := postgres.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		return nil, err
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	ropt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := redis.NewClient(ropt)
	c := &Core{Config: cfg, Log: log, Logs: logs, Pool: pool, Redis: rdb, Models: models, Failures: outbox.FailureStore{Pool: pool}, Secrets: secrets, sync: opt.Sync}
	c.Providers = modelprovider.New(pool, rdb, cfg.RedisPrefix, models, secrets, cfg.Outbound())
	c.Telemetry, err = telemetry.Setup(ctx, telemetry.Config{Service: opt.Function, Endpoint: cfg.OTLPEndpoint, Headers: cfg.OTLPHeaders, FlushEvery: cfg.OTLPFlush})
	if err != nil {
		pool.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	c.Stream = runstream.NewWriter(rdb, c.streamConfig())
	pub := opt.Publisher
	if pub == nil {
		if pub, err = c.cloudPublisher(ctx); err != nil {
			pool.Close()
			_ = rdb.Close()
			return nil, err
		}
	}
	c.Relay = outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: cfg.OutboxClaim, Sync: opt.Sync, Lanes: opt.Lanes,
		Retention: cfg.OutboxRetention, KeyRetention: cfg.OutboxKeyRetention}, log)
	c.Outbox = &outbox.Outbox{Writer: outbox.Writer{Source: events.Source(opt.Function), Claim: cfg.OutboxClaim}, Relay: c.Relay}
	return c, nil
}

func (c *Core) streamConfig() runstream.Config {
	return runstream.Config{Prefix: c.Config.RedisPrefix, StreamTTL: c.Config.StreamTTL, EndTail: c.Config.StreamTail}
}

// NewHub returns the run-stream hub that serves SSE clients (intake); the
// caller runs its Run loop.
func (c *Core) NewHub() *runstream.Hub { return runstream.NewHub(c.Redis, c.streamConfig(), c.Log) }

// RunHub returns a new hub already running until ctx ends.
func (c *Core) RunHub(ctx context.Context) *runstream.Hub {
	h := c.NewHub()
	go h.Run(ctx) //nolint:errcheck // ends with ctx
	return h
}

// Router returns an event router for the named function that records
// permanent failures.
func (c *Core) Router(function string) *faas.Router {
	r := faas.NewRouter(function, c.Failures, c.Log)
	r.Telemetry(c.Telemetry, c.sync)
	return r
}

// OnClose registers f to run when c closes, before the pool and Redis are
// released (openers built on c use it for their background work).
func (c *Core) OnClose(f func()) { c.closers = append(c.closers, f) }

// Close waits for the relay's in-flight publishes, runs the OnClose functions
// (last registered first) and releases the clients.
func (c *Core) Close() {
	c.Relay.Wait()
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.Pool.Close()
	_ = c.Redis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Telemetry.Shutdown(ctx)
}

// ensureDatabase creates the database named in dbURL when it does not exist
// (connecting to the server's "postgres" database to do so).
func ensureDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect to %s: %w", name, err)
	}
	admin := *u
	admin.Path = "/postgres"
	ac, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer ac.Close(ctx)
	_, err = ac.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Ready returns the OnReady hook of a function main: it prints one line that
// humans, tests and the cold-start benchmark wait for.
func Ready(function string) func(addr string) {
	return func(addr string) {
		fmt.Fprintf(os.Stderr, "%s: ready on %s\n", function, addr)
	}
}
