package kb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kbconnect"
	"github.com/yuxi-serverless/yuxi/shared/keyword"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// VectorSearcher searches a KB's vectors (collection = kb id).
type VectorSearcher interface {
	Search(ctx context.Context, collection string, query []float32, k int, groups []string) ([]vector.Hit, error)
}

// KeywordSearcher searches a KB's keyword index (index id = kb id).
type KeywordSearcher interface {
	Search(ctx context.Context, indexID, query string, k int, allow func(docID string) bool) ([]keyword.Hit, error)
}

// Models builds the embedder and reranker a KB names.
type Models interface {
	Embedder(spec string, dim int) (embed.Embedder, error)
	Reranker(spec string) (embed.Reranker, error)
}

// GraphRanker ranks a KB's chunks through its knowledge graph
// (graph.Retrieval): seeds from the query and the chunk ids of the top
// hits, best first. No graph, or no seed, is an empty list.
type GraphRanker interface {
	RankChunks(ctx context.Context, kbID, query string, hits []string, opt GraphQuery) ([]GraphHit, error)
}

// GraphStarter is a GraphRanker that can start on the query alone while
// the base search runs (the seeds the query names need no hit), so that a
// graph-augmented query pays max(base, query seeds) + the rest of the
// graph, not their sum. StartRanking returns RankChunks for the same
// query and options, waiting for what it started; it may be called once
// (or not at all: what was started ends with ctx or by itself).
type GraphStarter interface {
	StartRanking(ctx context.Context, kbID, query string, opt GraphQuery) func(hits []string) ([]GraphHit, error)
}

// GraphQuery is the graph part of the retrieval options.
type GraphQuery struct {
	EntityTopK, Depth, MaxNodes, TopK int
	Damping                           float64
}

// GraphHit is a chunk ranked by the PageRank mass of its entities.
type GraphHit struct {
	ChunkID string
	Score   float64
}

// Retriever answers queries over knowledge bases.
type Retriever struct {
	db      postgres.DB
	vectors VectorSearcher
	keyword KeywordSearcher
	models  Models
	graph   GraphRanker
	conn    *kbconnect.Client // read-only connector KBs (UseConnectors)
	secrets Sealer
}

// UseGraph installs the graph ranker of use_graph_retrieval (without one,
// the option changes nothing).
func (r *Retriever) UseGraph(g GraphRanker) { r.graph = g }

// NewRetriever returns a retriever.
func NewRetriever(db postgres.DB, vectors VectorSearcher, kw KeywordSearcher, models Models) *Retriever {
	return &Retriever{db: db, vectors: vectors, keyword: kw, models: models}
}

// Result is one retrieved chunk (the original's raw chunk shape, plus kb_id/id).
type Result struct {
	ID          string         `json:"id"`
	KBID        string         `json:"kb_id"`
	FileID      string         `json:"file_id"`
	Content     string         `json:"content"`
	Metadata    map[string]any `json:"metadata"`
	Score       float64        `json:"score"`
	Distance    *float64       `json:"distance,omitempty"`
	BM25Score   *float64       `json:"bm25_score,omitempty"`
	HybridScore *float64       `json:"hybrid_score,omitempty"`
	RerankScore *float64       `json:"rerank_score,omitempty"`
	FusionScore *float64       `json:"fusion_score,omitempty"`
	// GraphScore is the PageRank mass of the chunk's entities; FusionSources
	// the lists ("base", "graph") that found it (graph retrieval only).
	GraphScore    *float64 `json:"graph_score,omitempty"`
	FusionSources []string `json:"fusion_sources,omitempty"`
	vectorScore   *float64
}

// Query retrieves from k with options opt; fileName, when set, restricts the
// search to files whose name contains it. Errors are returned, never turned
// into an empty list.
func (r *Retriever) Query(ctx context.Context, k KB, query string, opt Retrieval, fileName string) (res []Result, err error) {
	ctx, span := telemetry.StartRetrieval(ctx, k.KBID, opt.FinalTopK)
	defer func() { span.End(err) }()
	return r.query(ctx, k, query, opt, fileName)
}

// query is Query inside its retrieval span.

func (r *Retriever) query(ctx context.Context, k KB, query string, opt Retrieval, fileName string) ([]Result, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return nil, failure.Unprocessable("empty_query", "query must not be empty")
	}
	if len(query) > 8000 {
		return nil, failure.Unprocessable("query_too_long", "query is longer than 8000 bytes")
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if k.KBType != TypeDocument {
		return r.connectorQuery(ctx, k, query, opt)
	}
	var groups []string
	var allow func(string) bool
	if fileName != "" {
		ids, err := fileIDsByName(ctx, r.db, k.KBID, fileName)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return []Result{}, nil
		}
		groups = ids
		set := map[string]bool{}
		for _, id := range ids {
			set[id] = true
		}
		allow = func(chunkID string) bool { return set[fileOfChunk(chunkID)] }
	}
	recall := opt.recall()
	// The graph starts on the query while the base search runs; its
	// context ends with this query's.
	var rankGraph func(hits []string) ([]GraphHit, error)
	if opt.UseGraph && r.graph != nil {
		gq := opt.graphQuery()
		if gs, ok := r.graph.(GraphStarter); ok {
			gctx, cancel := context.WithCancel(ctx)
			defer cancel()
			rankGraph = gs.StartRanking(gctx, k.KBID, query, gq)
		} else {
			rankGraph = func(hits []string) ([]GraphHit, error) { return r.graph.RankChunks(ctx, k.KBID, query, hits, gq) }
		}
	}
	var vec, kw []scored
	var err error
	if opt.SearchMode != "keyword" {
		if vec, err = r.vectorSearch(ctx, k, query, recall, groups); err != nil {
			return nil, err
		}
	}
	if opt.SearchMode != "vector" {
		hits, err := r.keyword.Search(ctx, k.KBID, query, opt.BM25TopK, allow)
		if err != nil {
			return nil, fmt.Errorf("keyword search: %w", err)
		}
		for _, h := range hits {
			kw = append(kw, scored{id: h.ID, score: h.Score})
		}
	}
	ranked := rank(vec, kw, opt, recall)
	if rankGraph != nil {
		if ranked, err = withGraph(rankGraph, ranked, opt, allow); err != nil {
			return nil, err
		}
	}
	results, err := r.hydrate(ctx, k.KBID, ranked, opt)
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, query, results, opt)
}

// recall is how many candidates a query ranks before hydrating them.
func (opt Retrieval) recall() int {
	recall := opt.FinalTopK
	if opt.UseReranker && opt.RecallTopK > recall {
		recall = opt.RecallTopK
	}
	if (opt.SearchMode == "hybrid" || opt.UseGraph) && opt.RecallTopK > recall {
		recall = opt.RecallTopK
	}
	return recall
}

// rank orders a query's vector and keyword candidates by the search mode,
// at most recall of them.
func rank(vec, kw []scored, opt Retrieval, recall int) []fused {
	var ranked []fused
	switch opt.SearchMode {
	case "vector":
		for _, v := range vec {
			if v.score < opt.SimilarityThreshold {
				continue
			}
			s := v.score
			ranked = append(ranked, fused{id: v.id, score: s, vector: &s})
		}
	case "keyword":
		for _, h := range kw {
			s := h.score
			ranked = append(ranked, fused{id: h.id, score: s, bm25: &s})
		}
	default:
		ranked = fuse(vec, kw, opt)
		kept := ranked[:0]
		for _, f := range ranked {
			if f.score >= opt.SimilarityThreshold {
				kept = append(kept, f)
			}
		}
		ranked = kept
	}
	if len(ranked) > recall {
		ranked = ranked[:recall]
	}
	return ranked
}

// finish reranks a query's hydrated results when opt says so and keeps
// the final top k.
func (r *Retriever) finish(ctx context.Context, query string, results []Result, opt Retrieval) ([]Result, error) {
	var err error
	if opt.UseReranker && len(results) > 0 {
		if results, err = r.rerank(ctx, query, results, opt); err != nil {
			return nil, err
		}
	}
	if len(results) > opt.FinalTopK {
		results = results[:opt.FinalTopK]
	}
	return results, nil
}

// KeywordManySearcher is a KeywordSearcher that searches several queries
// at one version of its index, reading that version once
// (keyword.Index.SearchMany).
type KeywordManySearcher interface {
	SearchMany(ctx context.Context, indexID string, queries []string, k int, allow func(docID string) bool) ([][]keyword.Hit, error)
}

// QueryMany answers each of queries as Query(ctx, k, query, opt, "") does
// — the same results, scores and order, and errs[i] the error Query would
// return for queries[i] — doing what the queries share once: one read of
// the keyword index's version for all their keyword searches and one load
// of all their chunks (two statements for any number of queries instead of
// two per query). Vector searches and reranking stay per query. Graph
// retrieval, connector KBs and a keyword searcher without SearchMany take
// Query for each query.
func (r *Retriever) QueryMany(ctx context.Context, k KB, queries []string, opt Retrieval) (res [][]Result, errs []error) {
	res, errs = make([][]Result, len(queries)), make([]error, len(queries))
	many, ok := r.keyword.(KeywordManySearcher)
	if len(queries) == 1 || k.KBType != TypeDocument || opt.UseGraph || !ok && opt.SearchMode != "vector" {
		for i, q := range queries {
			res[i], errs[i] = r.Query(ctx, k, q, opt, "")
		}
		return res, errs
	}
	if len(queries) == 0 {
		return res, errs
	}
	ctx, span := telemetry.StartRetrieval(ctx, k.KBID, opt.FinalTopK)
	var spanErr error
	defer func() { span.End(spanErr) }()
	fail := func(err error) ([][]Result, []error) {
		spanErr = err
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return make([][]Result, len(queries)), errs
	}
	if err := opt.Validate(); err != nil {
		return fail(err)
	}
	recall := opt.recall()
	texts := make([]string, len(queries))
	var live []int // the queries that are searched
	for i, q := range queries {
		q = strings.TrimSpace(q)
		switch {
		case q == "":
			errs[i] = failure.Unprocessable("empty_query", "query must not be empty")
		case len(q) > 8000:
			errs[i] = failure.Unprocessable("query_too_long", "query is longer than 8000 bytes")
		default:
			texts[i] = q
			live = append(live, i)
		}
	}
	vecs := make([][]scored, len(queries))
	if opt.SearchMode != "keyword" {
		for _, i := range live {
			v, err := r.vectorSearch(ctx, k, texts[i], recall, nil)
			if err != nil {
				errs[i] = err
				continue
			}
			vecs[i] = v
		}
	}
	kws := make([][]scored, len(queries))
	if opt.SearchMode != "vector" {
		var kwTexts []string
		var kwOf []int
		for _, i := range live {
			if errs[i] == nil {
				kwTexts, kwOf = append(kwTexts, texts[i]), append(kwOf, i)
			}
		}
		if len(kwTexts) > 0 {
			hits, err := many.SearchMany(ctx, k.KBID, kwTexts, opt.BM25TopK, nil)
			if err != nil {
				return fail(fmt.Errorf("keyword search: %w", err))
			}
			for j, i := range kwOf {
				for _, h := range hits[j] {
					kws[i] = append(kws[i], scored{id: h.ID, score: h.Score})
				}
			}
		}
	}
	ranked := make([][]fused, len(queries))
	var ids []string
	seen := map[string]bool{}
	for _, i := range live {
		if errs[i] != nil {
			continue
		}
		ranked[i] = rank(vecs[i], kws[i], opt, recall)
		for _, f := range ranked[i] {
			if !seen[f.id] {
				seen[f.id] = true
				ids = append(ids, f.id)
			}
		}
	}
	found, err := r.loadChunks(ctx, k.KBID, ids)
	if err != nil {
		return fail(err)
	}
	for _, i := range live {
		if errs[i] != nil {
			continue
		}
		res[i], errs[i] = r.finish(ctx, texts[i], results(k.KBID, ranked[i], found, opt), opt)
	}
	return res, errs
}

type scored struct {
	id    string
	score float64
}

type fused struct {
	id           string
	score        float64
	vector, bm25 *float64
	graph        *float64 // PageRank mass (graph retrieval)
	fusion       *float64 // RRF of the base and graph lists
	sources      []string // the lists that found it: "base", "graph"
}

// graphQuery is the graph part of opt.
func (opt Retrieval) graphQuery() GraphQuery {
	return GraphQuery{EntityTopK: opt.GraphEntityTopK, Depth: opt.GraphDepth,
		MaxNodes: opt.GraphMaxNodes, TopK: opt.GraphTopK, Damping: opt.PPRDamping}
}

// graphSeedHits is how many of the top chunk hits lend their entities to the
// graph's seeds.
const graphSeedHits = 10

// withGraph fuses the base list with the graph's chunks by reciprocal rank
// fusion (Cormack et al. 2009; the original's score += weight/(60+rank), base
// weight 1, graph graph_weight). allow (may be nil) filters graph chunks as
// the base search was filtered.
func withGraph(rankGraph func(hits []string) ([]GraphHit, error), base []fused, opt Retrieval, allow func(string) bool) ([]fused, error) {
	hits := make([]string, 0, graphSeedHits)
	for _, f := range base {
		if len(hits) == graphSeedHits {
			break
		}
		hits = append(hits, f.id)
	}
	g, err := rankGraph(hits)
	if err != nil {
		return nil, fmt.Errorf("graph retrieval: %w", err)
	}
	if len(g) == 0 {
		return base, nil
	}
	const k = 60.0
	byID := make(map[string]*fused, len(base)+len(g))
	order := make([]string, 0, len(base)+len(g))
	for rank, f := range base {
		c := f
		s := 1 / (k + float64(rank+1))
		c.fusion, c.sources = &s, []string{"base"}
		byID[c.id] = &c
		order = append(order, c.id)
	}
	rank := 0
	for _, h := range g {
		if allow != nil && !allow(h.ChunkID) {
			continue
		}
		rank++
		c := byID[h.ChunkID]
		if c == nil {
			zero := 0.0
			c = &fused{id: h.ChunkID, fusion: &zero}
			byID[h.ChunkID] = c
			order = append(order, h.ChunkID)
		}
		gs := h.Score
		c.graph = &gs
		*c.fusion += opt.GraphWeight / (k + float64(rank))
		c.sources = append(c.sources, "graph")
	}
	out := make([]fused, 0, len(order))
	for _, id := range order {
		c := byID[id]
		c.score = *c.fusion
		out = append(out, *c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].score > out[j].score })
	return out, nil
}

func (r *Retriever) vectorSearch(ctx context.Context, k KB, query string, n int, groups []string) ([]scored, error) {
	em, err := r.models.Embedder(k.EmbeddingModelSpec, k.EmbeddingDim)
	if err != nil {
		return nil, err
	}
	vs, err := em.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	if len(vs) != 1 || len(vs[0]) != k.EmbeddingDim {
		return nil, failure.Unprocessable("embedding_dimension_mismatch", "model %s returned a %d-dimension query vector; the knowledge base expects %d",
			k.EmbeddingModelSpec, lenFirst(vs), k.EmbeddingDim)
	}
	// Vectors are written before their chunks commit (and a crashed attempt
	// may leave some until its file is indexed again or deleted): only hits
	// with a committed chunk count, and the search widens until n of them are
	// found or the collection has no more.
	for want := n; ; want *= 4 {
		hits, err := r.vectors.Search(ctx, k.KBID, vs[0], want, groups)
		if errors.Is(err, vector.ErrCollectionNotFound) {
			// The collection is created when the KB's first file is indexed:
			// until then the KB has no vectors, which is no error.
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("vector search: %w", err)
		}
		out, err := r.committed(ctx, k.KBID, hits)
		if err != nil {
			return nil, err
		}
		if len(out) >= n || len(hits) < want || want >= maxVectorCandidates {
			if len(out) > n {
				out = out[:n]
			}
			return out, nil
		}
	}
}

// maxVectorCandidates bounds the widening of a vector search.
const maxVectorCandidates = 10000

// committed keeps the hits whose chunk is committed, in order.
func (r *Retriever) committed(ctx context.Context, kbID string, hits []vector.Hit) ([]scored, error) {
	if len(hits) == 0 {
		return nil, nil
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	rows, err := r.db.Query(ctx, `SELECT chunk_id FROM knowledge_chunks WHERE kb_id = $1 AND chunk_id = ANY($2)`, kbID, ids)
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	set := make(map[string]bool, len(have))
	for _, id := range have {
		set[id] = true
	}
	out := make([]scored, 0, len(hits))
	for _, h := range hits {
		if set[h.ID] {
			out = append(out, scored{id: h.ID, score: h.Score})
		}
	}
	return out, nil
}

func lenFirst(vs [][]float32) int {
	if len(vs) == 0 {
		return 0
	}
	return len(vs[0])
}

// fuse combines vector and BM25 candidates. "weighted" follows Milvus's
// WeightedRanker (the original): each score is normalised to [0,1] — cosine
// as (1+s)/2, BM25 as 2·atan(s)/π — and summed with the weights; a
// candidate missing from one list scores 0 there. "rrf" is reciprocal rank
// fusion with constant rrf_k.
func fuse(vec, kw []scored, opt Retrieval) []fused {
	byID := map[string]*fused{}
	get := func(id string) *fused {
		f := byID[id]
		if f == nil {
			f = &fused{id: id}
			byID[id] = f
		}
		return f
	}
	for rank, v := range vec {
		f := get(v.id)
		s := v.score
		f.vector = &s
		if opt.Fusion == "rrf" {
			f.score += 1 / float64(opt.RRFK+rank+1)
		} else {
			f.score += opt.VectorWeight * (1 + s) / 2
		}
	}
	for rank, h := range kw {
		f := get(h.id)
		s := h.score
		f.bm25 = &s
		if opt.Fusion == "rrf" {
			f.score += 1 / float64(opt.RRFK+rank+1)
		} else {
			f.score += opt.BM25Weight * 2 * math.Atan(s) / math.Pi
		}
	}
	if opt.Fusion != "rrf" {
		total := opt.VectorWeight + opt.BM25Weight
		for _, f := range byID {
			f.score /= total
		}
	}
	out := make([]fused, 0, len(byID))
	for _, f := range byID {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].id < out[j].id
	})
	return out
}

// hydrate loads the chunks of ranked ids (dropping ids whose chunk no longer
// exists: a vector or posting that outlived its chunk is never returned).
func (r *Retriever) hydrate(ctx context.Context, kbID string, ranked []fused, opt Retrieval) ([]Result, error) {
	if len(ranked) == 0 {
		return []Result{}, nil
	}
	ids := make([]string, len(ranked))
	for i, f := range ranked {
		ids[i] = f.id
	}
	found, err := r.loadChunks(ctx, kbID, ids)
	if err != nil {
		return nil, err
	}
	return results(kbID, ranked, found, opt), nil
}

// chunkRow is a loaded chunk as results need it.
type chunkRow struct {
	fileID, content, filename string
	index, tokens             int
}

// loadChunks loads the chunks of ids that exist, by id.
func (r *Retriever) loadChunks(ctx context.Context, kbID string, ids []string) (map[string]chunkRow, error) {
	found := make(map[string]chunkRow, len(ids))
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := r.db.Query(ctx, `SELECT c.chunk_id, c.file_id, c.chunk_index, c.content, f.filename, c.token_count
		FROM knowledge_chunks c JOIN knowledge_files f ON f.file_id = c.file_id
		WHERE c.kb_id = $1 AND c.chunk_id = ANY($2)`, kbID, ids)
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var rw chunkRow
		if err := rows.Scan(&id, &rw.fileID, &rw.index, &rw.content, &rw.filename, &rw.tokens); err != nil {
			return nil, err
		}
		found[id] = rw
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return found, nil
}

// results are the results of ranked ids whose chunk was found, in order.
func results(kbID string, ranked []fused, found map[string]chunkRow, opt Retrieval) []Result {
	out := make([]Result, 0, len(ranked))
	for _, f := range ranked {
		rw, ok := found[f.id]
		if !ok {
			continue
		}
		res := Result{ID: f.id, KBID: kbID, FileID: rw.fileID, Content: rw.content, Score: f.score,
			Metadata: map[string]any{"source": rw.filename, "chunk_id": f.id, "file_id": rw.fileID, "chunk_index": rw.index,
				"score": f.score, "token_count": rw.tokens}}
		if f.vector != nil && opt.IncludeDistances {
			d := 1 - *f.vector
			res.Distance = &d
			res.Metadata["distance"] = d
		}
		if f.bm25 != nil {
			res.BM25Score = f.bm25
		}
		if opt.SearchMode == "hybrid" && f.fusion == nil {
			s := f.score
			res.HybridScore = &s
		}
		if f.fusion != nil {
			res.FusionScore = f.fusion
			res.FusionSources = f.sources
			res.Metadata["fusion_score"] = *f.fusion
			res.Metadata["fusion_sources"] = f.sources
		}
		if f.graph != nil {
			res.GraphScore = f.graph
			res.Metadata["graph_score"] = *f.graph
		}
		out = append(out, res)
	}
	return out
}

func (r *Retriever) rerank(ctx context.Context, query string, results []Result, opt Retrieval) ([]Result, error) {
	rr, err := r.models.Reranker(opt.RerankerModel)
	if err != nil {
		return nil, err
	}
	docs := make([]string, len(results))
	for i, res := range results {
		docs[i] = res.Content
	}
	ranked, err := rr.Rerank(ctx, query, docs, len(docs))
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	out := make([]Result, 0, len(ranked))
	for _, rk := range ranked {
		if rk.Index < 0 || rk.Index >= len(results) {
			return nil, fmt.Errorf("rerank: the reranker returned index %d for %d documents", rk.Index, len(results))
		}
		res := results[rk.Index]
		s := rk.Score
		res.RerankScore = &s
		res.Score = s
		res.Metadata["rerank_score"] = s
		out = append(out, res)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out, nil
}

// fileIDsByName returns the ids of a KB's files whose name contains name.
func fileIDsByName(ctx context.Context, db postgres.DB, kbID, name string) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT file_id FROM knowledge_files WHERE kb_id = $1 AND NOT is_folder
		AND (filename ILIKE '%' || $2 || '%' OR original_filename ILIKE '%' || $2 || '%')`, kbID, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// fileOfChunk recovers the file id from a chunk id: chunk ids are the file
// id followed by "_<content hash>[_n]" (see chunk.ChunkIDs), and file ids
// have a fixed length ("file_" and 24 hex digits, see newID).
func fileOfChunk(chunkID string) string {
	const fileIDLen = len("file_") + 24
	if len(chunkID) > fileIDLen && strings.HasPrefix(chunkID, "file_") && chunkID[fileIDLen] == '_' {
		return chunkID[:fileIDLen]
	}
	return chunkID
}

// SearchResult is one hit of the agent tools' and CLI's structured output.
type SearchResult struct {
	ID       string         `json:"id"`
	KBID     string         `json:"kb_id"`
	FileID   string         `json:"file_id"`
	Content  string         `json:"content"`
	Metadata map[string]any `json:"metadata"`
}

// SearchOutputSchema is query_kb's result (the original's SearchOutputSchema).
type SearchOutputSchema struct {
	KBID    string         `json:"kb_id"`
	Results []SearchResult `json:"results"`
}

// SearchOutput shapes results for tools and the CLI (path-like metadata is
// not exposed).
func SearchOutput(kbID string, res []Result) SearchOutputSchema {
	out := SearchOutputSchema{KBID: kbID, Results: make([]SearchResult, 0, len(res))}
	for _, r := range res {
		md := map[string]any{}
		for k, v := range r.Metadata {
			if k == "path" || k == "filepath" || k == "object_key" {
				continue
			}
			md[k] = v
		}
		out.Results = append(out.Results, SearchResult{ID: r.ID, KBID: r.KBID, FileID: r.FileID, Content: r.Content, Metadata: md})
	}
	return out
}
