package graph_test

import (
	"context"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/graph/graphtest"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// memVectors is graph.VectorIndex in memory over the deterministic
// hashing embedder, searched exhaustively.
type memVectors struct {
	mu      sync.Mutex
	em      *embed.Hashing
	items   map[string][]float32
	upserts int
}

func (m *memVectors) Upsert(ctx context.Context, _ string, items []graph.VectorText) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		v, err := m.em.Embed(ctx, []string{it.Text})
		if err != nil {
			return err
		}
		m.items[it.ID] = v[0]
		m.upserts++
	}
	return nil
}

func (m *memVectors) Search(ctx context.Context, _ string, text string, k int) ([]graph.VectorHit, error) {
	q, err := m.em.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []graph.VectorHit
	for id, v := range m.items {
		var dot float64
		for i := range v {
			dot += float64(v[i]) * float64(q[0][i])
		}
		if !math.IsNaN(dot) && dot > 0 {
			out = append(out, graph.VectorHit{ID: id, Score: dot})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Score > out[j].Score || out[i].Score == out[j].Score && out[i].ID < out[j].ID
	})
	return out[:min(k, len(out))], nil
}

func (m *memVectors) Drop(context.Context, string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.items)
	return nil
}

// Entities and triples get vectors (all_vectors re-embeds them, by stable
// ids); at query time an entity the query names only loosely ("Alice
// Martins", which no name n-gram matches) is recalled by vector and seeds
// the graph, reaching the chunk two hops away.
func TestVectorRecallSeedsTheGraph(t *testing.T) {
	ctx := context.Background()
	pool, _ := pgtest.NewDatabase(t)
	eng := graph.NewPostgres(pool)
	if err := eng.WriteChunks(ctx, "kb", []graph.ChunkGraph{
		graphtest.Chunk("c1", "f1", map[string]string{"Zephyr Labs": "Organization"}, [3]string{"Alice Martin", "works at", "Zephyr Labs"}),
		graphtest.Chunk("c2", "f2", map[string]string{"Zephyr Labs": "Organization", "Oslo": "City"}, [3]string{"Zephyr Labs", "based in", "Oslo"}),
		graphtest.Chunk("c3", "f3", map[string]string{"Borealis": "Organization"}, [3]string{"Carl Holm", "works at", "Borealis"}),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO graph_extractor_configs (kb_id, llm_model_spec) VALUES ('kb', 'fake:m')`); err != nil {
		t.Fatal(err)
	}
	vecs := &memVectors{em: embed.NewHashing(256), items: map[string][]float32{}}
	b := graph.NewBuilder(pool, eng, indexedFiles{}, nil, &emitted{}, managing{})
	b.Vectors = vecs
	res, err := b.Reconcile(ctx, access.Subject{UID: "a", Role: "admin"}, "kb", "all_vectors")
	if err != nil || res.ReindexedEntities != 5 || res.Status != "reindexed" {
		t.Fatalf("all_vectors: %+v %v", res, err)
	}
	var triples []string
	for id := range vecs.items {
		if strings.HasPrefix(id, "t|") {
			triples = append(triples, id)
		}
	}
	if len(vecs.items) != 8 || len(triples) != 3 {
		t.Fatalf("vectors: %d items, triples %v; want 5 entities and 3 triples", len(vecs.items), triples)
	}
	if _, err := b.Reconcile(ctx, access.Subject{UID: "a", Role: "admin"}, "kb", "all_vectors"); err != nil || len(vecs.items) != 8 {
		t.Fatalf("a second all_vectors: %d items, %v", len(vecs.items), err)
	}

	q := kb.GraphQuery{EntityTopK: 5, Depth: 2, MaxNodes: 100, TopK: 10, Damping: 0.85}
	r := graph.NewRetrieval(eng)
	if hits, err := r.RankChunks(ctx, "kb", "Where do Alice Martins' colleagues work?", nil, q); err != nil || len(hits) != 0 {
		t.Fatalf("by name only: %+v %v (no name n-gram matches)", hits, err)
	}
	r.UseVectors(vecs)
	hits, err := r.RankChunks(ctx, "kb", "Where do Alice Martins' colleagues work?", nil, q)
	var got []string
	for _, h := range hits {
		got = append(got, h.ChunkID)
	}
	if err != nil || len(got) < 2 || got[0] != "c1" || !slices.Contains(got, "c2") || slices.Contains(got, "c3") {
		t.Fatalf("with vector recall: %v %v; want c1 first, c2 reached, not c3", got, err)
	}
}
