package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// stmtProxy is a TCP proxy in front of PostgreSQL that decodes what its
// clients send (the frontend half of the wire protocol) and, while on,
// counts statement executions by SQL text and round trips (a Sync closes
// an extended-protocol exchange, a Query is one). It adds latency, so the
// figures time nothing through it: it only tells where the transactions
// counted on the server come from. Statements pgx prepared (its statement
// cache) are named in Bind; the proxy maps names back to their Parse.
type stmtProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	on       bool
	execs    map[string]int // normalized SQL → executions
	trips    int            // Syncs + simple Queries
	prepares int            // Parse messages (pgx prepares a statement once per connection)
	parsed   map[string]int // normalized SQL → Parse messages
	// txs are the transactions the clients' messages make, as the server
	// counts them: BEGIN … COMMIT/ROLLBACK is one; outside it, every
	// exchange closed by a Sync (a statement, a batch, a preparation) and
	// every simple Query is one of its own.
	txs int
}

func startProxy(target string) (*stmtProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stmtProxy{ln: ln, target: target, execs: map[string]int{}, parsed: map[string]int{}}
	go p.serve()
	return p, nil
}

func (p *stmtProxy) close() { _ = p.ln.Close() }

// url returns dbURL with its host replaced by the proxy's address.
func (p *stmtProxy) url(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = p.ln.Addr().String()
	return u.String(), nil
}

func (p *stmtProxy) set(on bool) {
	p.mu.Lock()
	p.on = on
	p.mu.Unlock()
}

func (p *stmtProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *stmtProxy) handle(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
	// Every byte the decoder reads is forwarded as it is read.
	be := pgproto3.NewBackend(io.TeeReader(client, server), io.Discard)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			continue // the server answers; the real startup follows
		}
		break
	}
	prepared := map[string]string{} // statement name → SQL
	var bound string
	var inTx, implicit bool // in BEGIN … COMMIT; an implicit transaction open until the next Sync
	// txControl folds a statement into the transaction state.
	txControl := func(sql string, simple bool) {
		word, _, _ := strings.Cut(strings.ToUpper(strings.TrimSpace(sql)), " ")
		switch strings.TrimSuffix(word, ";") {
		case "BEGIN", "START":
			inTx, implicit = true, false
		case "COMMIT", "END", "ROLLBACK", "ABORT":
			if inTx {
				p.countTx()
			}
			inTx = false
		default:
			if !inTx {
				if simple {
					p.countTx()
				} else {
					implicit = true
				}
			}
		}
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Parse:
			if !inTx {
				implicit = true
			}
			prepared[m.Name] = m.Query
			p.mu.Lock()
			if p.on {
				p.prepares++
				p.parsed[normalize(m.Query)]++
			}
			p.mu.Unlock()
		case *pgproto3.Bind:
			bound = prepared[m.PreparedStatement]
		case *pgproto3.Execute:
			p.count(bound, 0)
			txControl(bound, false)
		case *pgproto3.Sync:
			p.count("", 1)
			if implicit && !inTx {
				p.countTx()
			}
			implicit = false
		case *pgproto3.Query:
			p.count(m.String, 1)
			txControl(m.String, true)
		case *pgproto3.Terminate:
			return
		}
	}
}

func (p *stmtProxy) count(sql string, trips int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	p.trips += trips
	if sql != "" {
		p.execs[normalize(sql)]++
	}
}

func (p *stmtProxy) countTx() {
	p.mu.Lock()
	if p.on {
		p.txs++
	}
	p.mu.Unlock()
}

// stmtCount is one statement's executions.
type stmtCount struct {
	sql       string
	n, parsed int // executions, preparations
}

// snapshot returns the counts, most executed first, and resets them.
func (p *stmtProxy) snapshot() ([]stmtCount, int, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]stmtCount, 0, len(p.execs))
	for s, n := range p.execs {
		out = append(out, stmtCount{s, n, p.parsed[s]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].sql < out[j].sql
	})
	trips, prepares, txs := p.trips, p.prepares, p.txs
	p.execs, p.trips, p.prepares, p.parsed, p.txs = map[string]int{}, 0, 0, map[string]int{}, 0
	return out, trips, prepares, txs
}

func normalize(sql string) string { return strings.Join(strings.Fields(sql), " ") }

// short cuts a statement for a report line.
func short(sql string, n int) string {
	if len(sql) <= n {
		return sql
	}
	return sql[:n] + "…"
}

var errNoTarget = errors.New("no PostgreSQL address in the database URL")

// hostOf returns host:port of a database URL.
func hostOf(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", errNoTarget
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432"), nil
	}
	return u.Host, nil
}

// profileWarm workflows run through the proxy before it counts.
const profileWarm = 5

// profileOurs runs n workflows of figure 8 on a second platform connected
// through a stmtProxy, and prints per step the round trips and the
// statements executed, most frequent first.
func (e *env) profileOurs(ctx context.Context, db benchkit.DB, n int) (stmtProfile, error) {
	target, err := hostOf(db.URL)
	if err != nil {
		return stmtProfile{}, err
	}
	px, err := startProxy(target)
	if err != nil {
		return stmtProfile{}, err
	}
	defer px.close()
	pURL, err := px.url(db.URL)
	if err != nil {
		return stmtProfile{}, err
	}
	prefix := benchkit.NewPrefix()
	defer e.DropPrefix(prefix)
	p, err := e.openPlatform(ctx, benchkit.DB{Name: db.Name, URL: pURL}, prefix, scriptedModels{toolSteps: wfSteps - 1})
	if err != nil {
		return stmtProfile{}, err
	}
	defer p.close()
	threads, err := p.threads(ctx, n+profileWarm)
	if err != nil {
		return stmtProfile{}, err
	}
	ours := &ourWorkflows{p: p, threads: threads}
	for range profileWarm { // statement caches of the pool's connections
		if _, err := ours.run(ctx); err != nil {
			return stmtProfile{}, err
		}
	}
	px.set(true)
	for range n {
		if _, err := ours.run(ctx); err != nil {
			return stmtProfile{}, err
		}
	}
	time.Sleep(100 * time.Millisecond) // the relay's last acknowledgement batch
	px.set(false)
	stmts, trips, prepares, txs := px.snapshot()
	return stmtProfile{who: "ours", workflows: n, stmts: stmts, trips: trips, prepares: prepares, txs: txs}, nil
}

// profileDBOS does the same for DBOS: a DBOS instance of its own on a pool
// through the proxy, launched, profiled and shut down before the timed one
// starts.
func (e *env) profileDBOS(ctx context.Context, db benchkit.DB, n int) (stmtProfile, error) {
	target, err := hostOf(db.URL)
	if err != nil {
		return stmtProfile{}, err
	}
	px, err := startProxy(target)
	if err != nil {
		return stmtProfile{}, err
	}
	defer px.close()
	pURL, err := px.url(db.URL)
	if err != nil {
		return stmtProfile{}, err
	}
	pool, err := postgres.Open(ctx, pURL, 0)
	if err != nil {
		return stmtProfile{}, err
	}
	defer pool.Close()
	d, err := launchDBOS(ctx, pool)
	if err != nil {
		return stmtProfile{}, err
	}
	defer d.shutdown()
	for range profileWarm {
		if _, err := d.run(ctx); err != nil {
			return stmtProfile{}, err
		}
	}
	px.set(true)
	for range n {
		if _, err := d.run(ctx); err != nil {
			return stmtProfile{}, err
		}
	}
	px.set(false)
	stmts, trips, prepares, txs := px.snapshot()
	return stmtProfile{who: "DBOS", workflows: n, stmts: stmts, trips: trips, prepares: prepares, txs: txs}, nil
}

// stmtProfile is what a profile saw.
type stmtProfile struct {
	who       string
	workflows int
	stmts     []stmtCount
	trips     int
	prepares  int
	txs       int
}

func (sp stmtProfile) print(r *benchkit.Report) {
	steps := float64(sp.workflows * wfSteps)
	total := 0
	for _, s := range sp.stmts {
		total += s.n
	}
	r.Detail("%s, where those transactions come from (%d workflows through a decoding proxy, untimed): per step %.2f transactions as the clients open them "+
		"(the server counts these plus whatever else ran on the database, autovacuum included), %.1f round trips, %.1f statement executions, %.2f statement preparations; executions per step:",
		sp.who, sp.workflows, float64(sp.txs)/steps, float64(sp.trips)/steps, float64(total)/steps, float64(sp.prepares)/steps)
	for _, s := range sp.stmts {
		prep := ""
		if s.parsed > 0 {
			prep = fmt.Sprintf(" [prepared %.2f/step]", float64(s.parsed)/steps)
		}
		r.Detail("  %5.2f  %s%s", float64(s.n)/steps, short(s.sql, 160), prep)
	}
}
