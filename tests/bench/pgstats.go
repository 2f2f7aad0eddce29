package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Server-side counters. PostgreSQL 15 keeps a backend's statistics pending
// and publishes them lazily: at most once a second while it is busy, and an
// idle backend may keep its last transactions unpublished until it runs
// another statement or exits (seen here: still unpublished after 40 s). So
// before reading pg_stat_database, the bench makes every backend of the
// database publish: its own pools with pg_stat_force_next_flush
// (flushStats), a process under measurement by closing its connections
// (terminateBackends; a backend publishes as it exits).

// xacts are the transaction counters of one database.
type xacts struct{ commit, rollback int64 }

func (x xacts) total() int64 { return x.commit + x.rollback }

// dbXacts reads pg_stat_database for the named database. The reader is
// connected to another database, so its own queries are never counted.
func (e *env) dbXacts(ctx context.Context, name string) (xacts, error) {
	var x xacts
	err := e.Admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, name).
		Scan(&x.commit, &x.rollback)
	if err != nil {
		return x, fmt.Errorf("read pg_stat_database for %s: %w", name, err)
	}
	return x, nil
}

// walSyncs reads pg_stat_wal.wal_sync: WAL flushes to disk by the whole
// cluster (every database, the WAL writer included).
func (e *env) walSyncs(ctx context.Context) (int64, error) {
	var n int64
	if err := e.Admin.QueryRow(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read pg_stat_wal: %w", err)
	}
	return n, nil
}

// backends returns the backends connected to the named database with the
// start of their latest statement. pg_stat_activity is live (not lazily
// published), so a statement started after t shows at once.
func (e *env) backends(ctx context.Context, name string) (map[int32]time.Time, error) {
	rows, err := e.Admin.Query(ctx, `SELECT pid, coalesce(query_start, backend_start) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend'`, name)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	out := map[int32]time.Time{}
	for rows.Next() {
		var pid int32
		var at time.Time
		if err := rows.Scan(&pid, &at); err != nil {
			return nil, err
		}
		out[pid] = at
	}
	return out, rows.Err()
}

// terminateBackends ends every client backend connected to the named
// database and waits until they are gone; each publishes its counters as it
// exits. It returns how many there were.
func (e *env) terminateBackends(ctx context.Context, name string) (int, error) {
	var n int
	if err := e.Admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, name).Scan(&n); err != nil {
		return 0, fmt.Errorf("terminate backends of %s: %w", name, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := e.backends(ctx, name)
		if err != nil {
			return n, err
		}
		if len(b) == 0 {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%d backends of %s still there 10s after pg_terminate_backend", len(b), name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flushStats makes every connection of the pools publish its pending
// statistics now (pg_stat_force_next_flush, PostgreSQL ≥ 15) and returns how
// many statements that took: each is one committed transaction the caller
// subtracts. The pools must be idle.
func flushStats(ctx context.Context, pools ...*pgxpool.Pool) (int, error) {
	n := 0
	for _, p := range pools {
		deadline := time.Now().Add(5 * time.Second)
		for p.Stat().AcquiredConns() > 0 {
			if time.Now().After(deadline) {
				return n, fmt.Errorf("flush statistics: a pool stayed busy for 5s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		conns := p.AcquireAllIdle(ctx)
		for _, c := range conns {
			_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			c.Release()
			if err != nil {
				return n, fmt.Errorf("flush statistics: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// commitCounter is a pgx tracer that classifies, from the client side, every
// transaction its pool ends: a write committed durably (the client waits for
// the WAL flush), a write committed with synchronous_commit = off, an outbox
// acknowledgement batch (also asynchronous), a read-only statement or
// transaction, a rollback. It also counts statement preparations and pool
// liveness pings, which the server counts as transactions of their own.
type commitCounter struct {
	mu     sync.Mutex
	on     bool
	conns  map[*pgx.Conn]*txState
	counts commitCounts
}

type commitCounts struct {
	durable, async, ack, readOnly, rollback, prepares, pings int
	// statements (round trips, preparations included) made on behalf of a
	// step (withStep) and the time the step waited for them.
	statements int
	waited     time.Duration
}

func (c commitCounts) writes() int { return c.durable + c.async }

func (c commitCounts) serverVisible() int {
	return c.durable + c.async + c.ack + c.readOnly + c.rollback + c.prepares + c.pings
}

type txState struct {
	inTx, wrote, async, ack bool
	// ended: the last statement closed an explicit transaction (a batch
	// BEGIN … COMMIT then leaves no implicit one to count at its end).
	ended bool
}

func newCommitCounter() *commitCounter { return &commitCounter{conns: map[*pgx.Conn]*txState{}} }

func (t *commitCounter) set(on bool) { t.mu.Lock(); t.on = on; t.mu.Unlock() }

func (t *commitCounter) snapshot() commitCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts
}

type startedKey struct{}

// TraceQueryStart implements pgx.QueryTracer. pgx sends BEGIN, COMMIT and
// ROLLBACK as statements, so they are seen here too.
func (t *commitCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx = context.WithValue(ctx, startedKey{}, time.Now())
	s := t.conns[conn]
	if s == nil {
		s = &txState{}
		t.conns[conn] = s
	}
	t.classifyLocked(s, normalizeSQL(d.SQL), false)
	return ctx
}

// classifyLocked folds one statement into conn state s. In a batch without
// BEGIN the statements share one implicit transaction, closed by TraceBatchEnd.
func (t *commitCounter) classifyLocked(s *txState, sql string, inBatch bool) {
	asyncConfig := strings.Contains(sql, "SET_CONFIG('SYNCHRONOUS_COMMIT', 'OFF'")
	switch word, _, _ := strings.Cut(sql, " "); word {
	case "BEGIN", "START":
		*s = txState{inTx: true}
	case "COMMIT", "END":
		t.countLocked(s)
		*s = txState{ended: true}
	case "ROLLBACK", "ABORT":
		if t.on {
			t.counts.rollback++
		}
		*s = txState{ended: true}
	case "SET":
		if strings.Contains(sql, "SYNCHRONOUS_COMMIT") && strings.Contains(sql, "OFF") {
			s.async = true
		}
	default:
		w := isWrite(sql)
		if s.inTx || inBatch {
			s.wrote = s.wrote || w
			s.async = s.async || asyncConfig
			s.ack = s.ack || strings.Contains(sql, "UPDATE OUTBOX SET PUBLISHED_AT")
			return
		}
		if t.on { // an implicit single-statement transaction
			switch {
			case w && strings.Contains(sql, "UPDATE OUTBOX SET PUBLISHED_AT"):
				t.counts.ack++ // the relay's acknowledgement, one statement
			case w && asyncConfig:
				t.counts.async++
			case w:
				t.counts.durable++
			default:
				t.counts.readOnly++
			}
		}
	}
}

func (t *commitCounter) countLocked(s *txState) {
	if !t.on {
		return
	}
	switch {
	case !s.wrote:
		t.counts.readOnly++
	case s.ack:
		t.counts.ack++
	case s.async:
		t.counts.async++
	default:
		t.counts.durable++
	}
}

type batchKey struct{}

// TraceBatchStart implements pgx.BatchTracer: a batch is one round trip.
func (t *commitCounter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.conns[conn]
	if s == nil {
		s = &txState{}
		t.conns[conn] = s
	}
	// A batch opened outside a transaction runs in an implicit one.
	if !s.inTx {
		*s = txState{}
	}
	return context.WithValue(context.WithValue(ctx, startedKey{}, time.Now()), batchKey{}, !s.inTx)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *commitCounter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	implicit, _ := ctx.Value(batchKey{}).(bool)
	t.classifyLocked(t.conns[conn], normalizeSQL(d.SQL), implicit)
}

// TraceBatchEnd implements pgx.BatchTracer: it closes an implicit
// transaction (a batch that did not leave an explicit one open).
func (t *commitCounter) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.mu.Lock()
	s := t.conns[conn]
	if implicit, _ := ctx.Value(batchKey{}).(bool); implicit && s != nil && !s.inTx {
		if s.ended {
			// BEGIN … COMMIT in one batch: counted at its COMMIT.
		} else if s.wrote {
			t.countLocked(s)
		} else if t.on {
			t.counts.readOnly++
		}
		*s = txState{}
	}
	t.mu.Unlock()
	t.waitedSince(ctx)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *commitCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.waitedSince(ctx)
}

func (t *commitCounter) waitedSince(ctx context.Context) {
	t0, ok := ctx.Value(startedKey{}).(time.Time)
	if !ok || !inStep(ctx) {
		return
	}
	d := time.Since(t0)
	t.mu.Lock()
	if t.on {
		t.counts.statements++
		t.counts.waited += d
	}
	t.mu.Unlock()
}

// TracePrepareStart implements pgx.PrepareTracer: outside a transaction a
// preparation is a transaction of its own on the server.
func (t *commitCounter) TracePrepareStart(ctx context.Context, conn *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.conns[conn]; t.on && (s == nil || !s.inTx) {
		t.counts.prepares++
	}
	return ctx
}

// TracePrepareEnd implements pgx.PrepareTracer. A preparation is a round
// trip of its own; its time is already inside the traced query's.
func (t *commitCounter) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	t.mu.Lock()
	if t.on && inStep(ctx) {
		t.counts.statements++
	}
	t.mu.Unlock()
}

// shouldPing keeps pgxpool's default (ping connections idle for more than a
// second when acquired) and counts the pings.
func (t *commitCounter) shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	ping := p.IdleDuration > time.Second
	if ping {
		t.mu.Lock()
		if t.on {
			t.counts.pings++
		}
		t.mu.Unlock()
	}
	return ping
}

// normalizeSQL upper-cases a statement and collapses its whitespace.
func normalizeSQL(sql string) string { return strings.ToUpper(strings.Join(strings.Fields(sql), " ")) }

// isWrite reports whether an upper-cased statement changes rows or takes
// row locks (both make the transaction write a commit record). sql is
// normalized (normalizeSQL).
func isWrite(sql string) bool {
	word, _, _ := strings.Cut(sql, " ")
	switch word {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
		return true
	case "WITH":
		for _, w := range []string{"INSERT ", "UPDATE ", "DELETE "} {
			if strings.Contains(sql, w) {
				return true
			}
		}
	case "SELECT":
		return strings.Contains(sql, " FOR UPDATE") || strings.Contains(sql, " FOR SHARE") ||
			strings.Contains(sql, " FOR NO KEY UPDATE")
	}
	return false
}

// openTracedPool opens a pool exactly like shared/postgres.Open with the
// default size (what bootstrap.OpenCore does), plus the commit counter.
func openTracedPool(ctx context.Context, url string, t *commitCounter) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.MaxConnIdleTime = 5 * time.Minute // as postgres.Open
	cfg.ConnConfig.Tracer = t
	cfg.ShouldPing = t.shouldPing
	return pgxpool.NewWithConfig(ctx, cfg)
}

type stepKey struct{}

// withStep marks ctx as a step's: the round trips made with it (and with
// contexts derived from it) are the step's own, unlike those of background
// work such as the relay's acknowledgement batches.
func withStep(ctx context.Context) context.Context { return context.WithValue(ctx, stepKey{}, true) }

func inStep(ctx context.Context) bool { v, _ := ctx.Value(stepKey{}).(bool); return v }
