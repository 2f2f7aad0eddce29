package graph_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

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
	plan := explain(t, pool, `EXPLAIN SELECT relation_id FROM graph_relations
		WHERE kb_id = 'k1' AND (source_id = ANY('{e1,e2}') OR target_id = ANY('{e1,e2}'))`)
	for _, ix := range []string{"graph_relations_source", "graph_relations_target"} {
		if !contains(plan, ix) {
			t.Fatalf("plan does not use %s:\n%s", ix, plan)
		}
	}
}

// explain runs an EXPLAIN statement and returns its plan's lines.
func explain(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) string {
	t.Helper()
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A pruned expansion (Limits.PerNode) takes a hub's first relations by id
// and stops at the node cap; RankMentioned ranks as RankChunks over
// Mentions.
func TestPostgresPrunedExpansionAndRankMentioned(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	e := graph.NewPostgres(pool)
	// A hub with 30 leaves (one chunk each), and each leaf with a tail.
	var chunks []graph.ChunkGraph
	for i := range 30 {
		leaf, tail := fmt.Sprintf("leaf%02d", i), fmt.Sprintf("tail%02d", i)
		chunks = append(chunks, graphtest.Chunk(fmt.Sprintf("c%02d", i), "f", nil, [3]string{"hub", "r", leaf}, [3]string{leaf, "r", tail}))
	}
	if err := e.WriteChunks(ctx, "kb", chunks); err != nil {
		t.Fatal(err)
	}
	hub := graph.EntityID("hub", "Person")
	full, err := e.Expand(ctx, "kb", []string{hub}, 2, graph.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Entities) != 61 || len(full.Relations) != 60 || full.Truncated {
		t.Fatalf("exact expansion: %d entities, %d relations, truncated %v", len(full.Entities), len(full.Relations), full.Truncated)
	}
	pruned, err := e.Expand(ctx, "kb", []string{hub}, 2, graph.Limits{PerNode: 4})
	if err != nil {
		t.Fatal(err)
	}
	// The hub lends its 4 lowest relation ids (it is their source); each of
	// those 4 leaves its relations (to the hub, to its tail).
	var hubRels []string
	for _, r := range full.Relations {
		if r.Source == hub {
			hubRels = append(hubRels, r.ID)
		}
	}
	slices.Sort(hubRels)
	got := map[string]bool{}
	for _, r := range pruned.Relations {
		got[r.ID] = true
	}
	for _, id := range hubRels[:4] {
		if !got[id] {
			t.Fatalf("pruned expansion lacks the hub's relation %s among its first four: %v", id, got)
		}
	}
	if len(pruned.Entities) != 9 || len(pruned.Relations) != 8 {
		t.Fatalf("pruned expansion: %d entities, %d relations, want 9 and 8", len(pruned.Entities), len(pruned.Relations))
	}
	capped, err := e.Expand(ctx, "kb", []string{hub}, 2, graph.Limits{PerNode: 4, MaxNodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(capped.Entities) != 3 || !capped.Truncated {
		t.Fatalf("pruned expansion over the node cap: %d entities, truncated %v", len(capped.Entities), capped.Truncated)
	}

	// The retrieval-only expansion walks the same ids (names and
	// descriptions left out), an unknown seed dropped as by Expand (the
	// first hop fetched with the seed check then goes unused).
	leaf := graph.EntityID("leaf07", "Person")
	for i, lim := range []graph.Limits{{}, {PerNode: 4}, {PerNode: 4, MaxNodes: 3}, {PerNode: 1, MaxNodes: 40, MaxEdges: 5},
		{PerNode: 4}, {PerNode: 1, MaxNodes: 40, MaxEdges: 5}, {PerNode: 4}} {
		seeds := []string{hub, "no-such-entity", leaf}
		switch {
		case i == 6: // more seeds than one hop part, an unknown one in the first part
			seeds = []string{hub}
			for j := range 130 {
				seeds = append(seeds, fmt.Sprintf("unknown%03d", j))
			}
			seeds = append(seeds, leaf)
		case i >= 4: // every seed exists
			seeds = []string{hub, leaf}
		}
		want, err := e.Expand(ctx, "kb", seeds, 2, lim)
		if err != nil {
			t.Fatal(err)
		}
		slim, err := e.ExpandIDs(ctx, "kb", seeds, 2, lim)
		if err != nil {
			t.Fatal(err)
		}
		if len(slim.Entities) != len(want.Entities) || len(slim.Relations) != len(want.Relations) || slim.Truncated != want.Truncated {
			t.Fatalf("%+v: ExpandIDs %d entities, %d relations, truncated %v; Expand %d, %d, %v", lim,
				len(slim.Entities), len(slim.Relations), slim.Truncated, len(want.Entities), len(want.Relations), want.Truncated)
		}
		for i, en := range want.Entities {
			if slim.Entities[i] != (graph.Entity{ID: en.ID}) {
				t.Fatalf("%+v: entity %d = %+v, want only the id %s", lim, i, slim.Entities[i], en.ID)
			}
		}
		for i, r := range want.Relations {
			if slim.Relations[i] != (graph.Relation{ID: r.ID, Source: r.Source, Target: r.Target}) {
				t.Fatalf("%+v: relation %d = %+v, want the ids of %+v", lim, i, slim.Relations[i], r)
			}
		}
	}

	scores := graph.PersonalizedPageRank(full, map[string]float64{hub: 1}, graph.PPROptions{})
	var ents []string
	var w []float64
	for _, en := range full.Entities {
		ents = append(ents, en.ID)
		w = append(w, scores[en.ID])
	}
	mentions, err := e.Mentions(ctx, "kb", ents)
	if err != nil {
		t.Fatal(err)
	}
	want := graph.RankChunks(scores, mentions, 10)
	ranked, err := e.RankMentioned(ctx, "kb", ents, w, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranked) != len(want) {
		t.Fatalf("RankMentioned = %v, RankChunks = %v", ranked, want)
	}
	for i := range want {
		if ranked[i].ChunkID != want[i].ChunkID || math.Abs(ranked[i].Score-want[i].Score) > 1e-12 {
			t.Fatalf("RankMentioned = %v, RankChunks = %v", ranked, want)
		}
	}
	// Ties (every leaf's chunk scores the same) go by chunk id in byte
	// order, entities without mass lend nothing, and limit 0 is all of
	// them, whatever the limit cuts.
	flat := map[string]float64{hub: 0}
	var fw []float64
	for i, id := range ents {
		s := 0.0
		if i%3 != 0 {
			s = 0.25
		}
		flat[id] = s
		fw = append(fw, s)
	}
	for _, limit := range []int{0, 1, 7, 29, 30, 100} {
		want := graph.RankChunks(flat, mentions, limit)
		got, err := e.RankMentioned(ctx, "kb", ents, fw, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("limit %d: RankMentioned = %v, RankChunks = %v", limit, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("limit %d: RankMentioned = %v, RankChunks = %v", limit, got, want)
			}
		}
	}
}

// Settle leaves the graph tables analysed and their pages all-visible, so
// that retrieval's index-only scans do not read the heap.
func TestPostgresSettle(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewDatabase(t)
	ctx := context.Background()
	e := graph.NewPostgres(pool)
	var chunks []graph.ChunkGraph
	for i := range 300 {
		chunks = append(chunks, graphtest.Chunk(fmt.Sprintf("c%03d", i), "f", nil,
			[3]string{fmt.Sprintf("a%03d", i), "r", fmt.Sprintf("b%03d", i%50)}))
	}
	if err := e.WriteChunks(ctx, "kb", chunks); err != nil {
		t.Fatal(err)
	}
	tables := []string{"graph_entities", "graph_relations", "graph_entity_mentions", "graph_relation_mentions"}
	state := func() map[string][2]int64 {
		out := map[string][2]int64{}
		for _, tb := range tables {
			var pages, visible int64
			if err := pool.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = $1::regclass`, tb).Scan(&pages, &visible); err != nil {
				t.Fatal(err)
			}
			out[tb] = [2]int64{pages, visible}
		}
		return out
	}
	for tb, s := range state() {
		if s[1] != 0 {
			t.Fatalf("%s: %d all-visible pages before Settle: the test would prove nothing", tb, s[1])
		}
	}
	if err := graph.Settle(ctx, e); err != nil {
		t.Fatal(err)
	}
	for tb, s := range state() {
		if s[0] == 0 || s[1] != s[0] {
			t.Fatalf("%s after Settle: %d pages, %d all-visible", tb, s[0], s[1])
		}
	}
	// A hop of the retrieval-only expansion (one direction) is now answered
	// from the index alone (0084 includes the other end).
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, tx, `EXPLAIN (ANALYZE, COSTS OFF) SELECT relation_id, source_id, target_id FROM graph_relations
		WHERE kb_id = 'kb' AND source_id = $1 ORDER BY relation_id LIMIT 8`, graph.EntityID("a007", "Person"))
	if !contains(plan, "Index Only Scan using graph_relations_source") || !contains(plan, "Heap Fetches: 0") {
		t.Fatalf("hop after Settle is not index-only without heap fetches:\n%s", plan)
	}
}
