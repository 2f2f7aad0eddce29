package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"cloud.google.com/go/pubsub"
	"cloud.google.com/go/pubsub/pstest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/functions/agent-step/agentstep"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus"
	"github.com/yuxi-serverless/yuxi/shared/cloudbus/cloudbustest"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/telemetry/telemetrytest"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 14: tracing's cost per agent step (off and on), and the outbox
// relay's throughput to the cloud event routers' fakes against the HTTP
// relay (issue 14).
const (
	traceWarm     = 20
	traceTimed    = 200 // timed steps per mode, alternating off and on
	traceOnTarget = 1.15
	relayEvents   = 2000 // outbox rows per relay
	relayPerTx    = 20   // rows per producing transaction
)

func figCloud(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[14] tracing and cloud relays",
		"tracing: agent-step steps (instant model) delivered through faas.Router, alternately with telemetry off (no endpoint) "+
			"and on (OTLP/HTTP to an in-process collector, batch export every 100ms); off-path allocations by testing.AllocsPerRun. "+
			"relays: 2,000 outbox rows written 20 per transaction and published by the outbox relay through the HTTP sender "+
			"(to a CloudEvents sink answering 202), the EventBridge publisher (to the SigV4-checking AWS fake) and the Pub/Sub "+
			"publisher (to pstest); events/s from the first commit to the last row acknowledged")
	if err := figTracing(ctx, e, r); err != nil {
		return err
	}
	return figRelays(ctx, e, r)
}

func figTracing(ctx context.Context, e *env, r *benchkit.Report) error {
	// Off: the instrumentation on the hot path allocates nothing.
	var tel *telemetry.Telemetry
	who := telemetry.Who{UserID: "u", ThreadID: "t", RunID: "r", Agent: "a"}
	offAllocs := testing.AllocsPerRun(1000, func() {
		c, inv := tel.StartEvent(ctx, events.TypeStepReady, "id", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		telemetry.Annotate(c, who)
		_, s1 := telemetry.StartStore(c, "run.claim")
		s1.End(nil)
		_, m := telemetry.StartModelCall(c, "p", "m", who)
		m.ModelResult("m", 1, 1, "stop")
		m.End(nil)
		_, s2 := telemetry.StartStore(c, "run.commit_step")
		s2.End(nil)
		inv.End("ack", false, nil)
	})
	r.Line("tracing_off_allocs", fmt.Sprintf("%.0f allocs/step", offAllocs), "", "0", offAllocs == 0)

	// The process's bus does not execute steps: the figure hands the
	// recorded StepReady events to the handler.
	app, rec, _, release, err := e.stepProcess(ctx)
	if err != nil {
		return err
	}
	defer release()
	cfg := app.Config
	steps, err := createRuns(ctx, app, rec, traceWarm+2*traceTimed)
	if err != nil {
		return err
	}
	col := telemetrytest.Start()
	defer col.Close()
	on, err := telemetry.Setup(ctx, telemetry.Config{Service: "agent-step", Endpoint: col.URL, FlushEvery: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer on.Shutdown(context.Background())
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() { defer close(relayDone); _ = app.Relay.Run(relayCtx) }()
	defer func() { stopRelay(); <-relayDone }()

	h := agentstep.New(app.Runs, instantModels{}, app.Tools, app.Stream,
		agentstep.Config{WorkerID: "bench-trace", Lease: cfg.StepLease}, app.Log)
	offR, onR := faas.NewRouter("agent-step", nil, app.Log), faas.NewRouter("agent-step", nil, app.Log)
	h.Register(offR)
	h.Register(onR)
	onR.Telemetry(on, false)
	e.Progress("figure 14: timing %d steps with tracing off and %d on, alternating", traceTimed, traceTimed)
	var offLat, onLat benchkit.Samples
	for i, s := range steps {
		ev, err := events.New(events.Source("dispatcher"), events.NewID(), s, events.NewTraceparent())
		if err != nil {
			return err
		}
		router, lat := offR, &offLat
		if i%2 == 1 {
			router, lat = onR, &onLat
		}
		t0 := time.Now()
		if res := router.Deliver(ctx, ev); res.Outcome != faas.Ack {
			return fmt.Errorf("step of run %s: %s %v", s.RunID, res.Outcome, res.Err)
		}
		if i >= traceWarm {
			*lat = append(*lat, time.Since(t0))
		}
	}
	on.Flush(ctx)
	spans := len(col.Spans())
	off50, on50 := offLat.P50(), onLat.P50()
	ratio := benchkit.DurRatio(on50, off50)
	r.Line("step_p50_tracing_off", benchkit.Ms(off50), "", "", false)
	r.Line("step_p50_tracing_on", benchkit.Ms(on50), benchkit.X(ratio)+" vs off", fmt.Sprintf("≤ %.2f×", traceOnTarget), ratio <= traceOnTarget)
	r.Detail("%d steps off, %d on; %d spans exported (invocation, claim and commit per traced step, warm-up included); p99 off %s, on %s",
		len(offLat), len(onLat), spans, benchkit.Ms(offLat.P99()), benchkit.Ms(onLat.P99()))
	return nil
}

func figRelays(ctx context.Context, e *env, r *benchkit.Report) error {
	db, _, drop, err := e.Scratch(ctx)
	if err != nil {
		return err
	}
	defer drop()
	pool, err := postgres.Open(ctx, db.URL, 20)
	if err != nil {
		return err
	}
	defer pool.Close()

	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer sink.Close()
	httpPub := outbox.PublisherFunc(faas.NewHTTPSender(sink.URL, &http.Client{Timeout: 30 * time.Second}).Send)

	aws := cloudbustest.NewAWS()
	defer aws.Close()
	ebPub := cloudbus.NewEventBridge(aws.EventBridge(), cloudbus.EventBridgeConfig{Bus: "yuxi-bench"})

	ps := pstest.NewServer()
	defer ps.Close()
	conn, err := grpc.NewClient(ps.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	psClient, err := pubsub.NewClient(ctx, "yuxi-bench", option.WithGRPCConn(conn))
	if err != nil {
		return err
	}
	defer psClient.Close()
	if _, err := psClient.CreateTopic(ctx, "yuxi-events"); err != nil {
		return err
	}
	psPub := cloudbus.NewPubSub(psClient, cloudbus.PubSubConfig{Topics: cloudbus.Routes{"*": {"yuxi-events"}}})
	defer psPub.Stop()

	rate := map[string]float64{}
	for _, c := range []struct {
		name string
		pub  outbox.Publisher
	}{{"http", httpPub}, {"eventbridge", ebPub}, {"pubsub", psPub}} {
		e.Progress("figure 14: relaying %d events through %s", relayEvents, c.name)
		d, err := relayRun(ctx, pool, c.pub)
		if err != nil {
			return fmt.Errorf("%s relay: %w", c.name, err)
		}
		rate[c.name] = float64(relayEvents) / d.Seconds()
	}
	r.Line("relay_http", fmt.Sprintf("%.0f events/s", rate["http"]), "", "", false)
	r.Line("relay_eventbridge", fmt.Sprintf("%.0f events/s", rate["eventbridge"]), benchkit.X(benchkit.Ratio(rate["eventbridge"], rate["http"]))+" vs http", "", false)
	r.Line("relay_pubsub", fmt.Sprintf("%.0f events/s", rate["pubsub"]), benchkit.X(benchkit.Ratio(rate["pubsub"], rate["http"]))+" vs http", "", false)
	var entries int
	for _, p := range aws.Puts() {
		entries += len(p)
	}
	r.Detail("EventBridge: %d entries in %d PutEvents requests (%.1f per request), %d refused signatures; Pub/Sub: %d messages",
		entries, len(aws.Puts()), float64(entries)/float64(max(1, len(aws.Puts()))), aws.BadSignatures(), len(ps.Messages()))
	return nil
}

// relayRun writes relayEvents rows through an outbox whose relay publishes
// with pub, and returns the time from the first commit until every row is
// acknowledged.
func relayRun(ctx context.Context, pool *pgxpool.Pool, pub outbox.Publisher) (time.Duration, error) {
	if _, err := pool.Exec(ctx, `TRUNCATE outbox`); err != nil {
		return 0, err
	}
	relay := outbox.NewRelay(pool, pub, outbox.RelayConfig{Claim: time.Minute}, nil)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = relay.Run(rctx) }()
	defer func() { stop(); <-done; relay.Wait() }()
	ob := &outbox.Outbox{Writer: outbox.Writer{Source: events.Source("bench"), Claim: time.Minute}, Relay: relay}
	t0 := time.Now()
	for i := 0; i < relayEvents; i += relayPerTx {
		err := ob.Tx(ctx, pool, func(tx pgx.Tx, emit outbox.Emit) error {
			for j := 0; j < relayPerTx; j++ {
				n := i + j
				p := events.StepReady{RunID: fmt.Sprintf("run_%05d", n), ThreadID: fmt.Sprintf("thread_%03d", n%100), StepNo: 1}
				if err := emit(outbox.Pending{Payload: p}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var published int
		if err := pool.QueryRow(ctx, `SELECT count(published_at) FROM outbox`).Scan(&published); err != nil {
			return 0, err
		}
		if published == relayEvents {
			return time.Since(t0), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d rows published after 2 minutes", published, relayEvents)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
