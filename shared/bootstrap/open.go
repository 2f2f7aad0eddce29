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
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/agent"
	"github.com/yuxi-serverless/yuxi/shared/auth"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/thread"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// App is an opened process: its clients and services.
type App struct {
	Config  Config
	Log     *slog.Logger
	Pool    *pgxpool.Pool
	Redis   *redis.Client
	Stream  *runstream.Writer
	Hub     *runstream.Hub
	Relay   *outbox.Relay
	Outbox  *outbox.Outbox
	Runs    *run.Store
	Agents  *agent.Store
	Threads *thread.Store
	Queue   *queue.Service
	Models  *llm.Registry
	Tools   *tool.Registry
	// Failures records permanent event failures (the routers' recorder).
	Failures outbox.FailureStore
	// Knowledge holds the knowledge-base engines.
	Knowledge *Knowledge

	tempSweptAt atomic.Int64 // unix nanos of the last temp-object sweep (FileSweeper)
}

// Options choose how the process publishes events.
type Options struct {
	// Function names the process in event sources ("/yuxi/<function>").
	Function string
	// Publisher overrides the relay's publisher (the local runner passes its
	// in-process bus). When nil, events go to Config.Sink over HTTP.
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

// Open connects and builds the services. Close releases them.
func Open(ctx context.Context, cfg Config, opt Options) (*App, error) {
	log := Logger(cfg.LogLevel).With("function", opt.Function)
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
	models, err := llm.LoadRegistry(cfg.Environ, &http.Client{Transport: http.DefaultTransport})
	if err != nil {
		pool.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("model providers: %w", err)
	}
	scfg := runstream.Config{Prefix: cfg.RedisPrefix, StreamTTL: cfg.StreamTTL, EndTail: cfg.StreamTail}
	app := &App{Config: cfg, Log: log, Pool: pool, Redis: rdb, Models: models, Failures: outbox.FailureStore{Pool: pool}}
	app.Stream = runstream.NewWriter(rdb, scfg)
	app.Hub = runstream.NewHub(rdb, scfg, log)
	pub := opt.Publisher
	if pub == nil {
		if cfg.Sink == "" {
			pub = outbox.PublisherFunc(func(ctx context.Context, ev cloudevents.Event) error {
				return errors.New("no event sink: set K_SINK (the broker URL) for a standalone function")
			})
		} else {
			pub = outbox.PublisherFunc(faas.NewHTTPSender(cfg.Sink, &http.Client{Timeout: 30 * time.Second}).Send)
		}
	}
	app.Relay = outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: cfg.OutboxClaim, Sync: opt.Sync, Lanes: opt.Lanes,
		Retention: cfg.OutboxRetention, KeyRetention: cfg.OutboxKeyRetention}, log)
	app.Outbox = &outbox.Outbox{Writer: outbox.Writer{Source: events.Source(opt.Function), Claim: cfg.OutboxClaim}, Relay: app.Relay}
	if err := app.openKnowledge(); err != nil {
		pool.Close()
		_ = rdb.Close()
		return nil, err
	}
	app.Tools = tool.NewRegistry(append([]tool.Tool{tool.AskUserQuestion{}, tool.MarkForImprovement{Pool: pool}}, app.KnowledgeTools()...)...)
	app.Runs = run.NewStore(pool, app.Outbox, app.Stream, log)
	app.Agents = agent.NewStore(pool, app.Tools.Has)
	app.Threads = thread.NewStore(pool)
	app.Queue = queue.NewService(pool, app.Outbox, app.Runs, app.Agents, modelCatalog{models}, app.Stream)
	return app, nil
}

// Auth builds the auth service, with configured secrets or ones generated
// and stored on first start.
func (a *App) Auth(ctx context.Context) (*auth.Service, error) {
	jwtSecret, keySecret := []byte(a.Config.JWTSecret), []byte(a.Config.APIKeySecret)
	if len(jwtSecret) == 0 {
		var err error
		if jwtSecret, keySecret, err = auth.LoadOrCreateSecrets(ctx, a.Pool); err != nil {
			return nil, err
		}
	}
	return auth.NewService(a.Pool, auth.Config{JWTSecret: jwtSecret, APIKeySecret: keySecret})
}

// Router returns an event router for the named function that records
// permanent failures.
func (a *App) Router(function string) *faas.Router {
	return faas.NewRouter(function, a.Failures, a.Log)
}

// Close releases the clients.
func (a *App) Close() {
	a.Relay.Wait()
	if a.Knowledge != nil && a.Knowledge.closeVectors != nil {
		a.Knowledge.closeVectors()
	}
	a.Pool.Close()
	_ = a.Redis.Close()
}

// modelCatalog adapts the model registry to the queue's Models.
type modelCatalog struct{ *llm.Registry }

func (m modelCatalog) Available(spec string) error {
	_, _, err := m.ChatModel(spec)
	return err
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
