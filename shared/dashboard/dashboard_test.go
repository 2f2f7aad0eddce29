package dashboard_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/dashboard"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// truth is what the rollups must equal: the same aggregates computed from
// the rows themselves (tool_agent counts calls made, so it is left out).
const truth = `SELECT metric, category, bucket, sum(n)::bigint FROM (
    SELECT 'messages' AS metric, role AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM messages
    UNION ALL SELECT 'messages_total', role, 'epoch', 1 FROM messages
    UNION ALL SELECT 'models', extra_metadata->>'model_spec', date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM messages
        WHERE role = 'assistant' AND coalesce(extra_metadata->>'model_spec', '') <> ''
    UNION ALL SELECT 'tokens', k, date_trunc('hour', created_at AT TIME ZONE 'UTC'), (extra_metadata->'usage'->>k)::bigint
        FROM messages, unnest(ARRAY['input_tokens', 'output_tokens']) k WHERE jsonb_typeof(extra_metadata->'usage'->k) = 'number'
    UNION ALL SELECT 'conversations', agent_id, date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM conversations
    UNION ALL SELECT 'conversations_agent', agent_id, 'epoch', 1 FROM conversations
    UNION ALL SELECT 'conversations_status', status, 'epoch', 1 FROM conversations
    UNION ALL SELECT 'tool_calls', tool_name, date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM tool_calls
    UNION ALL SELECT 'tool_status', status || '|' || tool_name, 'epoch', 1 FROM tool_calls
    UNION ALL SELECT 'feedback', rating, 'epoch', 1 FROM message_feedbacks
) x GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`

const rolled = `SELECT metric, category, bucket, sum(n)::bigint FROM dashboard_rollups WHERE metric <> 'tool_agent'
    GROUP BY 1, 2, 3 HAVING sum(n) <> 0 ORDER BY 1, 2, 3`

func rowsOf(t *testing.T, pool *pgxpool.Pool, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	return out
}

// work is one writer's transaction: a conversation with messages (one of
// them a two-row statement), a run with tool calls whose status changes,
// feedback that is edited, some deletes — and every fifth transaction
// rolled back.
func work(ctx context.Context, pool *pgxpool.Pool, w, i int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	agent := fmt.Sprintf("agent-%d", (w+i)%3)
	var conv int64
	if err := tx.QueryRow(ctx, `INSERT INTO conversations (thread_id, uid, agent_id) VALUES ($1, 'u', $2) RETURNING id`,
		fmt.Sprintf("t-%d-%d", w, i), agent).Scan(&conv); err != nil {
		return err
	}
	var user, asst int64
	if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content) VALUES ($1, 'user', 'q') RETURNING id`, conv).Scan(&user); err != nil {
		return err
	}
	meta := fmt.Sprintf(`{"model_spec": "p:m%d", "usage": {"input_tokens": %d, "output_tokens": %d}}`, i%2, 10+i, 3)
	if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, extra_metadata)
		VALUES ($1, 'assistant', 'a', $2), ($1, 'assistant', 'b', '{}') RETURNING id`, conv, meta).Scan(&asst); err != nil {
		return err
	}
	run := fmt.Sprintf("run-%d-%d", w, i)
	if _, err := tx.Exec(ctx, `INSERT INTO agent_runs (id, conversation_thread_id, conversation_id, runtime_scope_id, agent_slug, uid, status,
		request_id, run_type) VALUES ($1, $2, $3, 's', $4, 'u', 'completed', $1, 'chat')`, run, fmt.Sprintf("t-%d-%d", w, i), conv, agent); err != nil {
		return err
	}
	for c := 0; c < 2; c++ {
		if _, err := tx.Exec(ctx, `INSERT INTO tool_calls (run_id, step_no, message_id, call_index, tool_call_id, tool_name)
			VALUES ($1, 1, $2, $3, $4, $5)`, run, asst, c, fmt.Sprintf("call-%d", c), fmt.Sprintf("tool-%d", (i+c)%3)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE tool_calls SET status = CASE WHEN call_index = 0 THEN 'success' ELSE 'error' END WHERE run_id = $1`, run); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO message_feedbacks (message_id, uid, rating) VALUES ($1, 'u', 'like')`, asst); err != nil {
		return err
	}
	if i%2 == 0 {
		if _, err := tx.Exec(ctx, `UPDATE message_feedbacks SET rating = 'dislike' WHERE message_id = $1`, asst); err != nil {
			return err
		}
	}
	if i%3 == 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM messages WHERE id = $1`, user); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE conversations SET status = 'archived', title = 'x' WHERE id = $1`, conv); err != nil {
			return err
		}
	}
	if i%7 == 0 && i > 0 { // an earlier conversation of this writer goes, with everything under it
		if _, err := tx.Exec(ctx, `DELETE FROM conversations WHERE thread_id = $1`, fmt.Sprintf("t-%d-%d", w, i-1)); err != nil {
			return err
		}
	}
	if i%5 == 4 {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

func TestRollupsStayExactUnderConcurrentWriters(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	// Compaction runs all along, as the dispatcher's sweep would.
	done := make(chan struct{})
	compacted := make(chan int64, 1)
	go func() {
		var total int64
		defer func() { compacted <- total }()
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := dashboard.New(pool).Compact(ctx)
			if err != nil {
				errs <- fmt.Errorf("compact: %w", err)
				return
			}
			total += n
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := work(ctx, pool, w, i); err != nil {
					errs <- fmt.Errorf("writer %d, tx %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	folded := <-compacted
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want, got := rowsOf(t, pool, truth), rowsOf(t, pool, rolled)
	if len(want) == 0 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("rollups differ from the rows:\nrows:    %v\nrollups: %v", want, got)
	}
	if folded == 0 {
		t.Fatal("compaction, running alongside the writers, folded nothing")
	}
	// A last compaction leaves only shard 0, with the same sums.
	if _, err := dashboard.New(pool).Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rowsOf(t, pool, `SELECT count(*) FROM dashboard_rollups WHERE shard <> 0`); n[0] != "0" {
		t.Fatalf("%s rows outside shard 0 after an idle compaction", n[0])
	}
	if got := rowsOf(t, pool, rolled); fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("compaction changed the sums:\nrows:    %v\nrollups: %v", want, got)
	}

	d := dashboard.New(pool)
	basic, err := d.Basic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var convs, active, msgs, fbs, likes int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM conversations WHERE status = 'active'),
		(SELECT count(*) FROM messages), (SELECT count(*) FROM message_feedbacks), (SELECT count(*) FROM message_feedbacks WHERE rating = 'like')`).
		Scan(&convs, &active, &msgs, &fbs, &likes); err != nil {
		t.Fatal(err)
	}
	fb := basic["feedback_stats"].(map[string]any)
	if basic["total_conversations"] != convs || basic["active_conversations"] != active || basic["total_messages"] != msgs ||
		fb["total_feedbacks"] != fbs || msgs == 0 {
		t.Fatalf("basic = %v; rows: %d conversations (%d active), %d messages, %d feedbacks", basic, convs, active, msgs, fbs)
	}
	tools, err := d.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var calls, ok int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'success') FROM tool_calls`).Scan(&calls, &ok); err != nil {
		t.Fatal(err)
	}
	if tools["total_calls"] != calls || tools["successful_calls"] != ok {
		t.Fatalf("tools = %v; rows: %d calls, %d successful", tools, calls, ok)
	}
	ts, err := d.Timeseries(ctx, "models", "14hours")
	if err != nil {
		t.Fatal(err)
	}
	var models int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE role = 'assistant' AND extra_metadata ? 'model_spec'`).Scan(&models); err != nil {
		t.Fatal(err)
	}
	if ts["total_count"] != models || len(ts["data"].([]map[string]any)) != 14 {
		t.Fatalf("models time series total %v, want %d: %v", ts["total_count"], models, ts)
	}
	ag, err := d.Agents(ctx)
	if err != nil || ag["total_agents"] != 3 {
		t.Fatalf("agents = %v, %v", ag, err)
	}
	if _, err := d.Timeseries(ctx, "bogus", ""); err == nil {
		t.Fatal("unknown type accepted")
	}
	if _, err := d.Timeseries(ctx, "tokens", "14years"); err == nil {
		t.Fatal("unknown time range accepted")
	}
	list, err := d.Conversations(ctx, dashboard.ConversationFilter{Status: "all", Limit: 5})
	if err != nil || len(list) != 5 {
		t.Fatalf("conversations = %v, %v", list, err)
	}
	detail, err := d.Conversation(ctx, list[0]["thread_id"].(string))
	if err != nil || detail["message_count"] != len(detail["messages"].([]map[string]any)) {
		t.Fatalf("detail = %v, %v", detail, err)
	}
	if _, err := d.Conversation(ctx, "nope"); err != dashboard.ErrConversationNotFound {
		t.Fatalf("missing conversation: %v", err)
	}
}
