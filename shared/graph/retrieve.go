package graph

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// Retrieval is graph retrieval over an Engine (kb.GraphRanker): the
// entities the query names (its word n-grams matched against entity names)
// and the entities the top chunk hits mention are the seeds; their
// depth-hop subgraph (pruned: each node lends at most expandPerNode
// relations a direction) is ranked by PersonalizedPageRank; chunks are ranked by
// the PageRank mass of the entities they mention (HippoRAG's passage
// ranking). Seed weights follow the original: an entity the query names
// 1.0, an entity of a top chunk hit 0.3.
type Retrieval struct {
	engine Engine
	// vectors recalls entities by meaning too (vectors.go; nil: by name only).
	vectors VectorIndex
}

// NewRetrieval returns graph retrieval over engine.
func NewRetrieval(engine Engine) *Retrieval { return &Retrieval{engine: engine} }

var _ kb.GraphRanker = (*Retrieval)(nil)

// Seed weights (the original's: entity recall 1.0, base chunks' entities 0.3).
const (
	queryEntityWeight = 1.0
	hitEntityWeight   = 0.3
	maxNameWords      = 6
	// mentionEntities is how many of the highest-ranked entities (at least)
	// lend their PageRank mass to chunks.
	mentionEntities = 100
	// expandPerNode prunes the subgraph (Limits.PerNode): a hub lends the
	// walk its first relations, not its whole neighbourhood, which bounds a
	// query's cost on large graphs whatever the seeds.
	expandPerNode = 8
)

// idExpander is an engine with a retrieval-only Expand: the same entity and
// relation ids (and relation ends), without names, labels, types or
// descriptions, which PersonalizedPageRank does not read. Engines without it
// (Neo4j) are expanded with Expand.
type idExpander interface {
	ExpandIDs(ctx context.Context, kbID string, seeds []string, depth int, lim Limits) (Subgraph, error)
}

// mentionRanker is an engine that ranks chunks by their entities' scores
// itself (RankChunks over Mentions, without sending every mention back):
// the embedded engine, in one aggregate query.
type mentionRanker interface {
	RankMentioned(ctx context.Context, kbID string, entityIDs []string, scores []float64, limit int) ([]ScoredChunk, error)
}

// RankChunks implements kb.GraphRanker.
func (g *Retrieval) RankChunks(ctx context.Context, kbID, query string, hits []string, opt kb.GraphQuery) ([]kb.GraphHit, error) {
	return g.StartRanking(ctx, kbID, query, opt)(hits)
}

var _ kb.GraphStarter = (*Retrieval)(nil)

// StartRanking implements kb.GraphStarter: the query's seeds (entities it
// names, entities recalled by vector) are looked up at once, concurrently,
// while the caller runs its base search; the returned function adds the
// entities of the top hits and ranks.
func (g *Retrieval) StartRanking(ctx context.Context, kbID, query string, opt kb.GraphQuery) func(hits []string) ([]kb.GraphHit, error) {
	var (
		wg               sync.WaitGroup
		named            []Entity
		recalled         map[string]float64
		namedErr, recErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		named, namedErr = g.engine.EntitiesNamed(ctx, kbID, QueryNames(query), opt.EntityTopK)
	}()
	go func() {
		defer wg.Done()
		recalled, recErr = g.recallByVector(ctx, kbID, query, opt.EntityTopK)
	}()
	return func(hits []string) ([]kb.GraphHit, error) {
		// The entities of the top hits, while the query's seeds may still
		// be on their way: the three sources cost the slowest one.
		var byChunk map[string][]string
		var hErr error
		if len(hits) > 0 {
			byChunk, hErr = g.engine.ChunkEntities(ctx, kbID, hits)
			if hErr != nil {
				hErr = fmt.Errorf("entities of top hits: %w", hErr)
			}
		}
		wg.Wait()
		if err := errors.Join(namedErr, recErr, hErr); err != nil {
			return nil, err
		}
		return g.rank(ctx, kbID, named, recalled, byChunk, opt)
	}
}

// rank ranks chunks from the seeds: the entities the query names, those
// recalled by vector (entity id → weight) and those of the top hits (chunk
// id → entity ids).
func (g *Retrieval) rank(ctx context.Context, kbID string, named []Entity, recalled map[string]float64, byChunk map[string][]string, opt kb.GraphQuery) ([]kb.GraphHit, error) {
	seeds := map[string]float64{}
	for _, e := range named {
		seeds[e.ID] += queryEntityWeight
	}
	for id, w := range recalled {
		if _, ok := seeds[id]; !ok { // an entity both named and recalled counts once
			seeds[id] = w
		}
	}
	for _, ents := range byChunk {
		for _, id := range ents {
			seeds[id] += hitEntityWeight
		}
	}
	if len(seeds) == 0 {
		return nil, nil
	}
	// The query's entities first (they survive a node cap), then the
	// others sorted: the subgraph, hence PageRank's float sums and the
	// order of tied chunks, must not depend on map iteration.
	ids := make([]string, 0, len(seeds))
	for _, e := range named {
		ids = append(ids, e.ID)
	}
	rest := make([]string, 0, len(seeds))
	for id := range seeds {
		rest = append(rest, id)
	}
	sort.Strings(rest)
	ids = append(ids, rest...)
	return g.rankFrom(ctx, kbID, ids, seeds, opt)
}

// rankFrom ranks chunks from the seeds (entity id → weight), walking the
// subgraph from ids (the seeds in walk order).
func (g *Retrieval) rankFrom(ctx context.Context, kbID string, ids []string, seeds map[string]float64, opt kb.GraphQuery) ([]kb.GraphHit, error) {
	lim := Limits{MaxNodes: opt.MaxNodes, MaxEdges: 5 * opt.MaxNodes, PerNode: expandPerNode}
	var (
		sg  Subgraph
		err error
	)
	if x, ok := g.engine.(idExpander); ok {
		sg, err = x.ExpandIDs(ctx, kbID, ids, opt.Depth, lim)
	} else {
		sg, err = g.engine.Expand(ctx, kbID, ids, opt.Depth, lim)
	}
	if err != nil {
		return nil, err
	}
	nodes, scores := pageRank(sg, seeds, PPROptions{Damping: opt.Damping})
	if scores == nil {
		return nil, nil
	}
	// Only the entities holding most of the mass can lift a chunk into the
	// top graph_top_k: their mentions are loaded, not those of the whole
	// subgraph (a hub of the subgraph can be mentioned by thousands of chunks).
	top := make([]int32, len(nodes))
	for i := range top {
		top[i] = int32(i)
	}
	slices.SortStableFunc(top, func(a, b int32) int { return cmp.Compare(scores[b], scores[a]) })
	if limit := max(4*opt.TopK, mentionEntities); len(top) > limit {
		top = top[:limit]
	}
	ents := make([]string, len(top))
	w := make([]float64, len(top))
	for i, j := range top {
		ents[i], w[i] = nodes[j], scores[j]
	}
	var ranked []ScoredChunk
	if mr, ok := g.engine.(mentionRanker); ok {
		if ranked, err = mr.RankMentioned(ctx, kbID, ents, w, opt.TopK); err != nil {
			return nil, fmt.Errorf("rank mentions: %w", err)
		}
	} else {
		mentions, err := g.engine.Mentions(ctx, kbID, ents)
		if err != nil {
			return nil, fmt.Errorf("mentions: %w", err)
		}
		byID := make(map[string]float64, len(ents))
		for i, id := range ents {
			byID[id] = w[i]
		}
		ranked = RankChunks(byID, mentions, opt.TopK)
	}
	out := make([]kb.GraphHit, len(ranked))
	for i, c := range ranked {
		out[i] = kb.GraphHit{ChunkID: c.ChunkID, Score: c.Score}
	}
	return out, nil
}

// QueryNames returns the normalized word n-grams (up to six words) of a
// query: the names it could mention. Punctuation splits words, except inner
// hyphens, apostrophes and dots ("co-founder", "O'Neil", "v0.7").
func QueryNames(query string) []string {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\'' && r != '.' && r != '_'
	})
	for i, w := range words {
		w = strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s") // a possessive names its owner
		words[i] = strings.Trim(w, "-'._")
	}
	seen := map[string]bool{}
	var out []string
	for i := range words {
		for n := 1; n <= maxNameWords && i+n <= len(words); n++ {
			name := strings.Join(words[i:i+n], " ")
			if words[i+n-1] == "" || words[i] == "" || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}
