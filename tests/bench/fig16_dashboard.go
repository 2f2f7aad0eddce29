package main

import (
	"context"
	"fmt"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 16: the superadmin dashboard's stats over 1M messages against a
// bare SELECT count(*) over the same messages table, p99 each. The messages
// (and conversations, runs, tool calls, feedback) are written through the
// platform's triggers, so the rollups are the ones writers keep; the table
// is vacuumed and analysed first, so the floor may use an index-only scan.
const (
	dashMessages      = 1_000_000
	dashChunk         = 100_000
	dashConversations = 5_000
	dashToolCalls     = 200_000
	dashFeedbacks     = 20_000
	dashSamples       = 40
	dashTarget        = 1.0
)

func figDashboard(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[16] dashboard stats over 1M messages p99 ÷ SELECT count(*) FROM messages p99",
		"shared/dashboard use cases (stats, stats/users, stats/tools, stats/agents, calls/timeseries models 14days and 14weeks) "+
			"against a database of 1M messages in 5,000 conversations over 90 days, 200k tool calls, 20k feedbacks, written through "+
			"the rollup triggers; each measured 40 times after a warm-up; denominator: SELECT count(*) FROM messages in this run")
	db, err := e.NewDatabase(ctx)
	if err != nil {
		return err
	}
	defer e.DropDatabase(db)
	pool, err := postgres.Open(ctx, db.URL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	e.Progress("figure 16: writing %d messages through the rollup triggers", dashMessages)
	seed := []string{
		fmt.Sprintf(`INSERT INTO conversations (thread_id, uid, agent_id, status, created_at, updated_at)
			SELECT 'bench-' || g, 'user-' || (g %% 300), 'agent-' || (g %% 12), CASE WHEN g %% 10 = 0 THEN 'deleted' ELSE 'active' END,
				now() - (g %% 90) * interval '1 day', now() - (g %% 45) * interval '1 day' FROM generate_series(1, %d) g`, dashConversations),
		`INSERT INTO users (uid, username, password_hash, role) SELECT 'user-' || g, 'user ' || g, 'x', 'user' FROM generate_series(0, 299) g`,
		`INSERT INTO agent_runs (id, conversation_thread_id, conversation_id, runtime_scope_id, agent_slug, uid, status, request_id, run_type)
			SELECT 'run-' || id, thread_id, id, 's', agent_id, uid, 'completed', 'req-' || id, 'chat' FROM conversations`,
	}
	for _, q := range seed {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	for off := 0; off < dashMessages; off += dashChunk {
		if _, err := pool.Exec(ctx, `INSERT INTO messages (conversation_id, role, content, extra_metadata, created_at)
			SELECT c.id, CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, 'message ' || g,
				CASE WHEN g % 2 = 1 THEN jsonb_build_object('model_spec', 'provider:model-' || (g % 4),
					'usage', jsonb_build_object('input_tokens', 100 + g % 50, 'output_tokens', 20 + g % 30)) ELSE '{}' END,
				now() - ((g % 2160) * interval '1 hour')
			FROM generate_series($1::bigint, $2::bigint) g JOIN conversations c ON c.thread_id = 'bench-' || (1 + g % $3)`,
			off, off+dashChunk-1, dashConversations); err != nil {
			return fmt.Errorf("seed messages: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO tool_calls (run_id, step_no, message_id, call_index, tool_call_id, tool_name, status, created_at)
		SELECT r.id, g, m.id, 0, 'call-' || g, 'tool-' || (g % 15), CASE WHEN g % 9 = 0 THEN 'error' ELSE 'success' END, m.created_at
		FROM generate_series(1, $1) g
		JOIN LATERAL (SELECT id, conversation_id, created_at FROM messages WHERE id = 2 * g) m ON true
		JOIN agent_runs r ON r.conversation_id = m.conversation_id`, dashToolCalls); err != nil {
		return fmt.Errorf("seed tool calls: %w", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO message_feedbacks (message_id, uid, rating)
		SELECT 2 * g, 'user-' || (g % 300), CASE WHEN g % 4 = 0 THEN 'dislike' ELSE 'like' END FROM generate_series(1, $1) g`, dashFeedbacks); err != nil {
		return fmt.Errorf("seed feedback: %w", err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil {
		return err
	}
	d := dashboard.New(pool)
	measure := func(op func() error) (benchkit.Samples, error) {
		if err := op(); err != nil { // warm-up
			return nil, err
		}
		s := make(benchkit.Samples, 0, dashSamples)
		for range dashSamples {
			start := time.Now()
			if err := op(); err != nil {
				return nil, err
			}
			s = append(s, time.Since(start))
		}
		return s, nil
	}
	floor, err := measure(func() error { return pool.QueryRow(ctx, `SELECT count(*) FROM messages`).Scan(&n) })
	if err != nil {
		return err
	}
	stat := func(fn func(context.Context) (map[string]any, error)) func() error {
		return func() error { _, err := fn(ctx); return err }
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"stats", stat(d.Basic)},
		{"stats/users", stat(d.Users)},
		{"stats/tools", stat(d.Tools)},
		{"stats/agents", stat(d.Agents)},
		{"timeseries models 14days", func() error { _, err := d.Timeseries(ctx, "models", "14days"); return err }},
		{"timeseries tokens 14weeks", func() error { _, err := d.Timeseries(ctx, "tokens", "14weeks"); return err }},
	}
	f99 := floor.P99()
	worst, worstName := time.Duration(0), ""
	for _, o := range ops {
		s, err := measure(o.op)
		if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		r.Detail("%-26s p50 %s p99 %s (%.3f× of the count(*) p99)", o.name, benchkit.Ms(s.P50()), benchkit.Ms(s.P99()), benchkit.DurRatio(s.P99(), f99))
		if s.P99() > worst {
			worst, worstName = s.P99(), o.name
		}
	}
	ratio := benchkit.DurRatio(worst, f99)
	r.Line("dashboard_stats_p99", benchkit.Ms(worst)+" ("+worstName+", the slowest)",
		fmt.Sprintf("%.3f× of SELECT count(*) p99 %s over %d messages", ratio, benchkit.Ms(f99), n),
		fmt.Sprintf("≤ %.0f×", dashTarget), ratio <= dashTarget && n == dashMessages)
	return nil
}
