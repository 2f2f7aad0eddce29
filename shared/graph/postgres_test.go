package graph_test

import (
	"context"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/graphtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

func TestPostgresEngineContract(t *testing.T) {
	graphtest.Run(t, func(t *testing.T) graph.Engine {
		pool, _ := pgtest.NewDatabase(t)
		return graph.NewPostgres(pool)
	})
}

// TestPostgresExpandUsesIndexes checks the hop query the engine runs is
// planned on the source/target indexes, not a scan of the relations.
func TestPostgresExpandUsesIndexes(t *testing.T) {
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	// 20k relations over 10k entities in 20 knowledge bases, analysed.
	if _, err := pool.Exec(ctx, `INSERT INTO graph_relations (kb_id, relation_id, source_id, target_id, type)
		SELECT 'k' || (i % 20), 'r' || i, 'e' || (i % 10000), 'e' || ((i * 7) % 10000), 't' FROM generate_series(1, 20000) i;
		ANALYZE graph_relations`); err != nil {
		t.Fatal(err)
	}
	var plan string
	rows, err := pool.Query(ctx, `EXPLAIN SELECT relation_id FROM graph_relations
		WHERE kb_id = 'k1' AND (source_id = ANY('{e1,e2}') OR target_id = ANY('{e1,e2}'))`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		plan += line + "\n"
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for _, ix := range []string{"graph_relations_source", "graph_relations_target"} {
		if !contains(plan, ix) {
			t.Fatalf("plan does not use %s:\n%s", ix, plan)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
