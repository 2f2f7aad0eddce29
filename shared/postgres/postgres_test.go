package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// Migrations are applied once however many processes start at the same time,
// and re-running them is a no-op.
func TestMigrateIsIdempotentUnderConcurrentStarts(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t) // already migrated once
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- postgres.Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var applied int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if files := len(postgres.MigrationSources()); applied != files {
		t.Fatalf("schema_migrations has %d rows for %d files", applied, files)
	}
	var agents int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM agents WHERE slug = 'default-chatbot'`).Scan(&agents)
	if agents != 1 {
		t.Fatalf("seed rows duplicated or missing: %d", agents)
	}
}

func TestOneActiveRunPerThreadIsEnforcedByTheDatabase(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO conversations (thread_id, uid, agent_id) VALUES ('t1', 'u', 'a')`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO agent_runs (id, conversation_thread_id, conversation_id, runtime_scope_id, agent_slug, uid, status, request_id, run_type)
		VALUES ($1, 't1', (SELECT id FROM conversations WHERE thread_id = 't1'), 't1', 'a', 'u', $2, $1, 'chat')`
	if _, err := pool.Exec(ctx, insert, "r1", "running"); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, insert, "r2", "pending")
	if !postgres.IsUniqueViolation(err, "uq_agent_runs_one_active_per_thread") {
		t.Fatalf("a second active run was accepted: %v", err)
	}
	if _, err := pool.Exec(ctx, insert, "r3", "completed"); err != nil {
		t.Fatalf("terminal runs are not limited: %v", err)
	}
}
