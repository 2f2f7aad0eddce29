// Package outbox is the transactional outbox: events are written in the same
// transaction as the state change that causes them, and published only after
// that transaction commits. Nothing is published that was not committed, and
// nothing committed is lost: a sweep republishes rows whose publication was
// not acknowledged.
//
// Delivery is at-least-once. A row is "published" when its Publisher says so:
// the in-process bus acknowledges after the handler finished; the HTTP sink
// after the broker accepted the event.
//
// Published rows are deleted after a retention window by Relay.Prune, which
// the dispatcher's sweep runs; which dedupe keys outlive their rows, and why,
// is written down in retention.go.
//
// Imported by: domain packages that change state (they call Write inside their
// transactions), function mains and the local runner (they run a Relay).
// May import: events, shared/faas, shared/postgres, pgx, the CloudEvents SDK.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
)

// Pending is an event to write. DedupeKey, when set, makes the write
// idempotent: a second row with the same key is silently skipped — while the
// first row exists, or, for the keys retention.go keeps, for the keys'
// longer retention after it was pruned.
type Pending struct {
	Payload   events.Payload
	DedupeKey string
}

// Row is a written outbox row, handed to the relay after commit.
type Row struct {
	ID    int64
	Event cloudevents.Event
	// Before, when set, is work the event must follow: the relay runs it
	// once, just before it first publishes the row (e.g. the run stream's
	// events a consumer of the event must find already there), so the
	// producer returns without waiting for it. Like the fast path itself
	// it is best effort: a row the sweep republishes after a crash has no
	// Before. Without a relay (Outbox.Publish with none) it runs at once.
	Before func(ctx context.Context)
}

// Writer writes outbox rows inside a caller's transaction.
type Writer struct {
	Source string        // CloudEvents source of the writing function, e.g. "/yuxi/agent-step"
	Claim  time.Duration // how long the writer owns its rows for the fast path before the sweep may take them
}

// Querier runs a statement returning a row: a transaction, or a connection
// inside an explicit transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Write inserts the events through tx (a transaction). Rows skipped by their
// dedupe key are not returned. The traceparent in ctx (if any) is continued
// by each event.
func (w Writer) Write(ctx context.Context, tx Querier, pending ...Pending) ([]Row, error) {
	out := make([]Row, 0, len(pending))
	for _, p := range pending {
		ins, err := w.insert(ctx, p)
		if err != nil {
			return nil, err
		}
		row, ok, err := ins.scan(tx.QueryRow(ctx, ins.sql, ins.args...))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, row)
		}
	}
	return out, nil
}

const insertSQL = `
	INSERT INTO outbox (event_id, type, source, subject, data, extensions, dedupe_key, claimed_until)
	VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7, now() + $8::interval)
	ON CONFLICT (dedupe_key) DO NOTHING
	RETURNING id`

// insertion is one outbox row to write: its event, the insert (insertSQL, or
// insertKeptSQL for keys that outlive their row) and its arguments.
type insertion struct {
	ev   cloudevents.Event
	sql  string
	args []any
}

// insert builds the CloudEvent for p, continuing the traceparent in ctx.
func (w Writer) insert(ctx context.Context, p Pending) (insertion, error) {
	claim := w.Claim
	if claim <= 0 {
		claim = 30 * time.Second
	}
	// The producer's traceparent is the consumer's parent: with tracing on it
	// names the producing invocation's span (shared/telemetry), so the
	// consumer's span hangs under it in the trace.
	tp := events.TraceparentFrom(ctx)
	if tp == "" {
		tp = events.NewTraceparent()
	}
	ev, err := events.New(w.Source, events.NewID(), p.Payload, tp)
	if err != nil {
		return insertion{}, err
	}
	ext, err := json.Marshal(ev.Extensions())
	if err != nil {
		return insertion{}, fmt.Errorf("encode extensions: %w", err)
	}
	var dedupe *string
	sql := insertSQL
	if p.DedupeKey != "" {
		k := p.DedupeKey
		dedupe = &k
		if keepsKey(k) {
			sql = insertKeptSQL
		}
	}
	return insertion{ev: ev, sql: sql, args: []any{ev.ID(), ev.Type(), ev.Source(), ev.Subject(), ev.Data(), ext, dedupe, claim.String()}}, nil
}

// scan reads the insert's result: ok is false when the dedupe key skipped it.
func (in insertion) scan(row pgx.Row) (Row, bool, error) {
	var id int64
	err := row.Scan(&id)
	if err == pgx.ErrNoRows {
		return Row{}, false, nil // already written by an earlier (duplicate) attempt
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("write outbox event %s: %w", in.ev.Type(), err)
	}
	return Row{ID: id, Event: in.ev}, true, nil
}

func rowToEvent(eventID, typ, source string, subject *string, data, ext []byte) (cloudevents.Event, error) {
	ev := cloudevents.NewEvent()
	ev.SetID(eventID)
	ev.SetType(typ)
	ev.SetSource(source)
	if subject != nil {
		ev.SetSubject(*subject)
	}
	if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
		return ev, err
	}
	var m map[string]any
	if len(ext) > 0 {
		if err := json.Unmarshal(ext, &m); err != nil {
			return ev, fmt.Errorf("decode extensions: %w", err)
		}
	}
	for k, v := range m {
		ev.SetExtension(k, v)
	}
	return ev, nil
}

func jsonValid(b []byte) bool { return json.Valid(b) }

// Emit writes events inside the transaction it was handed to.
type Emit func(pending ...Pending) error

// Outbox couples a Writer with a Relay: Tx runs a transaction in which fn may
// emit events, and hands the committed rows to the relay after commit.
type Outbox struct {
	Writer Writer
	Relay  *Relay
}

// Tx runs fn in a transaction; events emitted by fn are published after commit.
func (o *Outbox) Tx(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, fn func(tx pgx.Tx, emit Emit) error) error {
	rows, err := o.TxRows(ctx, pool, fn)
	if err != nil {
		return err
	}
	o.Publish(ctx, rows)
	return nil
}

// TxRows runs fn in a transaction like Tx but hands nothing to the relay:
// it returns the rows committed, for the caller either to Publish or to
// keep while it carries the work they announce on itself (a chain of
// checkpointed batches in one invocation), settling them with QueueSettle
// in the transaction that finishes that work. A kept row stays claimed for
// the writer's Claim; if the writer dies first, the sweep publishes it then,
// the same recovery as a publication lost in a crash. A writer that keeps a
// row must settle or publish it well within the claim, or the sweep
// delivers it while the work is still under way (harmless to an idempotent
// consumer, but done twice).
func (o *Outbox) TxRows(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, fn func(tx pgx.Tx, emit Emit) error) ([]Row, error) {
	var rows []Row
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	emit := func(p ...Pending) error {
		r, err := o.Writer.Write(ctx, tx, p...)
		rows = append(rows, r...)
		return err
	}
	if err := fn(tx, emit); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return rows, nil
}

// InsertCTE is Writer.InsertCTE of o's writer; the caller hands the row
// its statement wrote to Publish after commit.
func (o *Outbox) InsertCTE(ctx context.Context, p Pending, name, guard string, first int) (CTE, error) {
	return o.Writer.InsertCTE(ctx, p, name, guard, first)
}

// QueueSettle queues, on a batch of the caller's transaction, marking rows
// kept from TxRows published: that transaction does the work they announce,
// so their delivery would only be a no-op.
func QueueSettle(b *pgx.Batch, rows []Row) {
	if len(rows) == 0 {
		return
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	b.Queue(`UPDATE outbox SET published_at = now() WHERE id = ANY($1) AND published_at IS NULL`, ids)
}

// QueueWrite queues the inserts of pending events on a batch that will run
// inside the caller's transaction (one network round trip for the whole
// batch). The written rows are appended to *rows when the batch's results
// are read; the caller hands them to the relay after commit.
func (w Writer) QueueWrite(ctx context.Context, b *pgx.Batch, rows *[]Row, pending ...Pending) error {
	for _, p := range pending {
		ins, err := w.insert(ctx, p)
		if err != nil {
			return err
		}
		b.Queue(ins.sql, ins.args...).QueryRow(func(row pgx.Row) error {
			r, ok, err := ins.scan(row)
			if ok {
				*rows = append(*rows, r)
			}
			return err
		})
	}
	return nil
}

// CTE is one event's insert rendered as a data-modifying CTE of a caller's
// statement (see Writer.InsertCTE).
type CTE struct {
	SQL  string // `name AS (INSERT INTO outbox … SELECT … FROM guard … RETURNING id)`
	Args []any  // its arguments, numbered from the first one the caller gave
	ev   cloudevents.Event
}

// Row is the row the CTE wrote, given the id the caller's statement returned
// for it (`(SELECT id FROM name)`): ok is false when nothing was written (the
// guard yielded no row, or the dedupe key skipped it).
func (c CTE) Row(id *int64) (Row, bool) {
	if id == nil {
		return Row{}, false
	}
	return Row{ID: *id, Event: c.ev}, true
}

// InsertCTE renders the insert of p as a CTE named name for a caller that
// writes its state change and the event in one statement, committed on its
// own: the event is written once when the CTE named guard (an earlier CTE of
// the caller's WITH, yielding at most one row) yields a row, and not at all
// when it yields none. Its arguments are numbered from $first. Keys that
// outlive their row (retention.go) take a second table and are refused here:
// write them with Write or QueueWrite.
func (w Writer) InsertCTE(ctx context.Context, p Pending, name, guard string, first int) (CTE, error) {
	if keepsKey(p.DedupeKey) {
		return CTE{}, fmt.Errorf("outbox: kept key %q cannot be written as a CTE", p.DedupeKey)
	}
	ins, err := w.insert(ctx, p)
	if err != nil {
		return CTE{}, err
	}
	n := func(i int) string { return fmt.Sprintf("$%d", first+i) }
	sql := name + ` AS (INSERT INTO outbox (event_id, type, source, subject, data, extensions, dedupe_key, claimed_until)
		SELECT ` + n(0) + `::text, ` + n(1) + `::text, ` + n(2) + `::text, NULLIF(` + n(3) + `::text, ''), ` + n(4) + `::jsonb, ` +
		n(5) + `::jsonb, ` + n(6) + `::text, now() + ` + n(7) + `::interval FROM ` + guard + `
		ON CONFLICT (dedupe_key) DO NOTHING
		RETURNING id)`
	return CTE{SQL: sql, Args: ins.args, ev: ins.ev}, nil
}

// Publish hands rows committed by a caller-managed transaction to the relay.
func (o *Outbox) Publish(ctx context.Context, rows []Row) {
	if o.Relay != nil && len(rows) > 0 {
		o.Relay.Publish(ctx, rows)
		return
	}
	for _, row := range rows {
		if row.Before != nil {
			row.Before(ctx)
		}
	}
}
