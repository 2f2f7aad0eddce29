package knowledge

import (
	"context"
	"errors"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// graphVectors is graph.VectorIndex over the vector store: a knowledge
// base's entities and triples live in the collection "<kb_id>__graph",
// embedded with the knowledge base's own embedding model.
type graphVectors struct {
	store  vector.Store
	kbs    *kb.Store
	models *Models
}

// graphCollection names a knowledge base's graph vector collection (kb's
// naming: a KB's purge drops it).
func graphCollection(kbID string) string { return kb.GraphCollection(kbID) }

// embedBatch bounds the texts of one embedding request.
const embedBatch = 64

func (g graphVectors) embed(ctx context.Context, kbID string, texts []string) ([][]float32, error) {
	k, err := g.kbs.LoadSettings(ctx, kbID) // the models only, per batch: no file count
	if err != nil {
		return nil, err
	}
	em, err := g.models.Embedder(k.EmbeddingModelSpec, k.EmbeddingDim)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, 0, len(texts))
	for i := 0; i < len(texts); i += embedBatch {
		vs, err := em.Embed(ctx, texts[i:min(i+embedBatch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

func (g graphVectors) Upsert(ctx context.Context, kbID string, items []graph.VectorText) error {
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Text
	}
	vs, err := g.embed(ctx, kbID, texts)
	if err != nil {
		return err
	}
	out := make([]vector.Item, 0, len(items))
	for i, it := range items {
		if len(vs[i]) == 0 || allZero(vs[i]) {
			continue // a name without terms embeds as nothing
		}
		out = append(out, vector.Item{ID: it.ID, Group: "graph", Vector: vs[i]})
	}
	if len(out) == 0 {
		return nil
	}
	if err := g.store.EnsureCollection(ctx, graphCollection(kbID), len(out[0].Vector)); err != nil {
		return err
	}
	return g.store.Upsert(ctx, graphCollection(kbID), out)
}

func (g graphVectors) Search(ctx context.Context, kbID, text string, k int) ([]graph.VectorHit, error) {
	vs, err := g.embed(ctx, kbID, []string{text})
	if err != nil || len(vs) == 0 || allZero(vs[0]) {
		return nil, err
	}
	hits, err := g.store.Search(ctx, graphCollection(kbID), vs[0], k, nil)
	if errors.Is(err, vector.ErrCollectionNotFound) {
		return nil, nil // no graph vectors (yet)
	}
	if err != nil {
		return nil, err
	}
	out := make([]graph.VectorHit, len(hits))
	for i, h := range hits {
		out[i] = graph.VectorHit{ID: h.ID, Score: h.Score}
	}
	return out, nil
}

func (g graphVectors) Drop(ctx context.Context, kbID string) error {
	return g.store.DropCollection(ctx, graphCollection(kbID))
}

func allZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}
