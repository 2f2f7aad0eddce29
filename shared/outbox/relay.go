package outbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/faas"
)

// Publisher delivers one event. It returns nil when the event is delivered
// (in-process: handled; HTTP sink: accepted), faas.Permanent(err) when it
// can never be delivered, and any other error to have it retried later.
type Publisher interface {
	Publish(ctx context.Context, ev cloudevents.Event) error
}

// RelayConfig tunes a Relay.
type RelayConfig struct {
	Claim       time.Duration // publish lease of a row (default 30s); in-flight rows are re-claimed every Claim/3
	MaxInFlight int           // concurrent publications (default 64)
	// Lanes bounds the publications of some event types separately (type →
	// at most this many at once, each type its own lane), outside
	// MaxInFlight. With the in-process bus a publication is the handler's
	// run, so this is the local runner's stand-in for a Knative Service's
	// containerConcurrency: heavy work (parsing, indexing) cannot take every
	// slot, or every core, from the chat path.
	Lanes        map[string]int
	SweepBatch   int           // rows per sweep query (default 200)
	AckInterval  time.Duration // acknowledgements are batched this often (default 20ms)
	RetryBackoff time.Duration // first in-process retry delay (default 200ms); doubles, 3 tries, then the sweep owns the row
	// Sync makes Publish wait for delivery and write its acknowledgements
	// before returning: for platforms that freeze a function after its
	// response (AWS Lambda, Cloud Run functions). Never use it with the
	// in-process bus (a handler would wait on the handlers it triggers).
	Sync bool
	// Retention: published rows older than this are deleted by Prune
	// (default 24h). KeyRetention: how long kept dedupe keys outlive their
	// rows (default 7 days; see retention.go). PruneBatch rows per delete
	// statement (default 1000), at most PruneBatches statements per Prune
	// (default 20).
	Retention    time.Duration
	KeyRetention time.Duration
	PruneBatch   int
	PruneBatches int
}

func (c *RelayConfig) defaults() {
	if c.Claim <= 0 {
		c.Claim = 30 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 64
	}
	if c.SweepBatch <= 0 {
		c.SweepBatch = 200
	}
	if c.AckInterval <= 0 {
		c.AckInterval = 20 * time.Millisecond
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 200 * time.Millisecond
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.KeyRetention <= 0 {
		c.KeyRetention = 7 * 24 * time.Hour
	}
	if c.PruneBatch <= 0 {
		c.PruneBatch = 1000
	}
	if c.PruneBatches <= 0 {
		c.PruneBatches = 20
	}
}

// Relay publishes committed outbox rows: right after commit (Publish, the fast
// path) and from the sweep (Sweep) for rows nobody acknowledged.
// Run must be running for acknowledgements and claim renewals to be written.
type Relay struct {
	pool *pgxpool.Pool
	pub  Publisher
	cfg  RelayConfig
	log  *slog.Logger

	sem      chan struct{}
	lanes    map[string]chan struct{}
	mu       sync.Mutex
	inflight map[int64]struct{}
	acks     []int64
	ackWake  chan struct{}
	wg       sync.WaitGroup
}

// NewRelay returns a relay publishing through pub.
func NewRelay(pool *pgxpool.Pool, pub Publisher, cfg RelayConfig, log *slog.Logger) *Relay {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	lanes := map[string]chan struct{}{}
	for typ, n := range cfg.Lanes {
		if n > 0 {
			lanes[typ] = make(chan struct{}, n)
		}
	}
	return &Relay{
		pool: pool, pub: pub, cfg: cfg, log: log,
		sem:      make(chan struct{}, cfg.MaxInFlight),
		lanes:    lanes,
		inflight: map[int64]struct{}{},
		ackWake:  make(chan struct{}, 1),
	}
}

// slot is the semaphore a row's publication takes: its type's lane, or the
// shared one.
func (r *Relay) slot(typ string) chan struct{} {
	if l, ok := r.lanes[typ]; ok {
		return l
	}
	return r.sem
}

// Publish hands committed rows to the publisher asynchronously. Call it only
// after the transaction that wrote rows committed. It never blocks on delivery
// (unless Sync); each row's Before runs in its delivery, ahead of the event.
func (r *Relay) Publish(ctx context.Context, rows []Row) {
	ctx = context.WithoutCancel(ctx) // the producer's request may end; publication must not
	var wg sync.WaitGroup
	for _, row := range rows {
		r.mu.Lock()
		if _, busy := r.inflight[row.ID]; busy {
			r.mu.Unlock()
			if row.Before != nil {
				row.Before(ctx) // a row's Before is never dropped
			}
			continue
		}
		r.inflight[row.ID] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.deliver(ctx, row)
		}()
	}
	if r.cfg.Sync {
		wg.Wait()
		r.flushAcks(ctx)
	}
}

func (r *Relay) deliver(ctx context.Context, row Row) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, row.ID)
		r.mu.Unlock()
	}()
	if row.Before != nil {
		row.Before(ctx) // ahead of the lane: it only has to precede the event
	}
	sem := r.slot(row.Event.Type())
	sem <- struct{}{}
	defer func() { <-sem }()
	backoff := r.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := r.pub.Publish(ctx, row.Event)
		if err == nil || faas.IsPermanent(err) {
			if err != nil {
				r.log.Warn("outbox event failed permanently", "type", row.Event.Type(), "id", row.Event.ID(), "error", err)
			}
			r.ack(row.ID)
			return
		}
		if attempt >= 3 {
			// Leave it to the sweep: the row stays unpublished and its claim expires.
			r.log.Info("outbox publish deferred to sweep", "type", row.Event.Type(), "id", row.Event.ID(), "error", err)
			r.noteError(row.ID, err)
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff *= 2
	}
}

func (r *Relay) ack(id int64) {
	r.mu.Lock()
	r.acks = append(r.acks, id)
	r.mu.Unlock()
	select {
	case r.ackWake <- struct{}{}:
	default:
	}
}

func (r *Relay) noteError(id int64, err error) {
	msg := err.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	_, _ = r.pool.Exec(context.Background(), `UPDATE outbox SET last_error = $2 WHERE id = $1`, id, msg)
}

// Run writes batched acknowledgements and renews claims of in-flight rows
// until ctx ends, then flushes the remaining acknowledgements.
func (r *Relay) Run(ctx context.Context) error {
	renew := time.NewTicker(r.cfg.Claim / 3)
	defer renew.Stop()
	for {
		select {
		case <-ctx.Done():
			r.flushAcks(context.Background())
			return nil
		case <-r.ackWake:
			// Batch acknowledgements that arrive close together.
			t := time.NewTimer(r.cfg.AckInterval)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			r.flushAcks(context.WithoutCancel(ctx))
		case <-renew.C:
			r.renewClaims(ctx)
		}
	}
}

// Wait blocks until in-flight publications finished (for orderly shutdown).
func (r *Relay) Wait() { r.wg.Wait() }

// flushAcks marks acknowledged rows published. Losing this write is harmless
// (the rows are republished and handlers are idempotent), so it does not
// wait for the WAL flush.
func (r *Relay) flushAcks(ctx context.Context) {
	r.mu.Lock()
	ids := r.acks
	r.acks = nil
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	// One statement, its own transaction, not awaited on disk (set_config(…,
	// true) lasts for the statement's transaction): an acknowledgement lost in
	// a database crash only means the sweep publishes the row again.
	if _, err := r.pool.Exec(ctx, `WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true))
		UPDATE outbox SET published_at = now() FROM cfg WHERE id = ANY($1) AND published_at IS NULL`, ids); err != nil {
		r.log.Error("outbox ack", "error", err)
	}
}

func (r *Relay) renewClaims(ctx context.Context) {
	r.mu.Lock()
	ids := make([]int64, 0, len(r.inflight))
	for id := range r.inflight {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if _, err := r.pool.Exec(ctx, `UPDATE outbox SET claimed_until = now() + $2::interval WHERE id = ANY($1) AND published_at IS NULL`,
		ids, r.cfg.Claim.String()); err != nil && ctx.Err() == nil {
		r.log.Error("outbox renew claims", "error", err)
	}
}

// Sweep claims unpublished rows whose claim expired and publishes them. It
// returns how many rows it took. Safe to run from many processes at once.
func (r *Relay) Sweep(ctx context.Context) (int, error) {
	rows, err := r.pool.Query(ctx, `
		UPDATE outbox o SET claimed_until = now() + $2::interval, attempts = o.attempts + 1
		WHERE o.id IN (
			SELECT id FROM outbox
			WHERE published_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING o.id, o.event_id, o.type, o.source, o.subject, o.data, o.extensions`,
		r.cfg.SweepBatch, r.cfg.Claim.String())
	if err != nil {
		return 0, err
	}
	var batch []Row
	for rows.Next() {
		var (
			id                   int64
			eventID, typ, source string
			subject              *string
			data, ext            []byte
		)
		if err := rows.Scan(&id, &eventID, &typ, &source, &subject, &data, &ext); err != nil {
			rows.Close()
			return 0, err
		}
		ev, err := rowToEvent(eventID, typ, source, subject, data, ext)
		if err != nil {
			r.log.Error("outbox row unreadable", "id", id, "error", err)
			continue
		}
		batch = append(batch, Row{ID: id, Event: ev})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	r.Publish(ctx, batch)
	return len(batch), nil
}
