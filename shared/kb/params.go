package kb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/postgres"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Retrieval holds the retrieval options of a KB (query_params.options),
// overridable per query. Field names follow the original.
type Retrieval struct {
	SearchMode          string  `json:"search_mode"` // vector | keyword | hybrid
	FinalTopK           int     `json:"final_top_k"`
	SimilarityThreshold float64 `json:"similarity_threshold"`
	BM25TopK            int     `json:"bm25_top_k"`
	VectorWeight        float64 `json:"vector_weight"`
	BM25Weight          float64 `json:"bm25_weight"`
	Fusion              string  `json:"fusion"` // weighted (the original's WeightedRanker) | rrf
	RRFK                int     `json:"rrf_k"`
	UseReranker         bool    `json:"use_reranker"`
	RerankerModel       string  `json:"reranker_model"`
	RecallTopK          int     `json:"recall_top_k"`
	IncludeDistances    bool    `json:"include_distances"`
	// Graph retrieval (the original's names; graph_depth is ours): seed
	// entities recalled from the query and the top chunk hits, their
	// graph_depth-hop subgraph ranked by Personalized PageRank, the chunks
	// of the top entities fused with the chunk results by RRF.
	UseGraph        bool    `json:"use_graph_retrieval"`
	GraphEntityTopK int     `json:"graph_entity_top_k"` // seed entities recalled from the query
	GraphDepth      int     `json:"graph_depth"`        // hops around the seeds
	GraphMaxNodes   int     `json:"graph_max_nodes"`    // subgraph cap
	GraphTopK       int     `json:"graph_top_k"`        // chunks ranked by PageRank mass
	GraphWeight     float64 `json:"graph_weight"`       // the graph list's RRF weight (the base list's is 1)
	PPRDamping      float64 `json:"ppr_damping"`
}

// DefaultRetrieval is used where a KB saved nothing and embeds with a
// provider's model: hybrid search with the original's weights, since a
// semantic embedder finds paraphrases BM25 misses and BM25 finds the exact
// terms embedders blur.
func DefaultRetrieval() Retrieval {
	return Retrieval{SearchMode: "hybrid", FinalTopK: 10, SimilarityThreshold: 0, BM25TopK: 50, VectorWeight: 0.7,
		BM25Weight: 0.3, Fusion: "weighted", RRFK: 60, RecallTopK: 50, IncludeDistances: true,
		GraphEntityTopK: 10, GraphDepth: 2, GraphMaxNodes: 2000, GraphTopK: 20, GraphWeight: 1, PPRDamping: 0.85}
}

// DefaultRetrievalFor is the default for a KB embedding with the model
// spec. The offline builtin embedders hash words and character n-grams: a
// lexical signal that BM25 already carries better (it has idf), so mixing
// them in only adds noise — on SciFact, hybrid with the 0.7/0.3 weights scores
// nDCG@10 0.38 against BM25's 0.68, and no weight on the hashing vectors
// beats BM25 alone (make bench, figure 5). Their KBs search by keyword by
// default; vector and hybrid remain a query option away.
func DefaultRetrievalFor(embeddingModelSpec string) Retrieval {
	r := DefaultRetrieval()
	if strings.HasPrefix(embeddingModelSpec, "builtin:") {
		r.SearchMode = "keyword"
	}
	return r
}

// ParamOption describes one retrieval option for GET /query-params.
type ParamOption struct {
	Key      string   `json:"key"`
	Label    string   `json:"label"`
	Type     string   `json:"type"` // select | number | boolean | string
	Default  any      `json:"default"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Step     *float64 `json:"step,omitempty"`
	Options  []string `json:"options,omitempty"`
	DependOn string   `json:"depend_on,omitempty"`
}

func f(v float64) *float64 { return &v }

// ParamOptions lists the retrieval options with the KB's current values as defaults.
func ParamOptions(cur Retrieval) []ParamOption {
	return []ParamOption{
		{Key: "search_mode", Label: "Search mode", Type: "select", Default: cur.SearchMode, Options: []string{"vector", "keyword", "hybrid"}},
		{Key: "final_top_k", Label: "Results", Type: "number", Default: cur.FinalTopK, Min: f(1), Max: f(100), Step: f(1)},
		{Key: "similarity_threshold", Label: "Similarity threshold", Type: "number", Default: cur.SimilarityThreshold, Min: f(0), Max: f(1), Step: f(0.01)},
		{Key: "bm25_top_k", Label: "BM25 candidates", Type: "number", Default: cur.BM25TopK, Min: f(1), Max: f(200), Step: f(1)},
		{Key: "vector_weight", Label: "Vector weight", Type: "number", Default: cur.VectorWeight, Min: f(0), Max: f(1), Step: f(0.05), DependOn: "search_mode=hybrid"},
		{Key: "bm25_weight", Label: "BM25 weight", Type: "number", Default: cur.BM25Weight, Min: f(0), Max: f(1), Step: f(0.05), DependOn: "search_mode=hybrid"},
		{Key: "fusion", Label: "Fusion", Type: "select", Default: cur.Fusion, Options: []string{"weighted", "rrf"}, DependOn: "search_mode=hybrid"},
		{Key: "rrf_k", Label: "RRF k", Type: "number", Default: cur.RRFK, Min: f(1), Max: f(1000), Step: f(1), DependOn: "fusion=rrf"},
		{Key: "use_reranker", Label: "Rerank", Type: "boolean", Default: cur.UseReranker},
		{Key: "reranker_model", Label: "Reranker model", Type: "string", Default: cur.RerankerModel, DependOn: "use_reranker=true"},
		{Key: "recall_top_k", Label: "Recall candidates", Type: "number", Default: cur.RecallTopK, Min: f(10), Max: f(200), Step: f(1)},
		{Key: "include_distances", Label: "Include distances", Type: "boolean", Default: cur.IncludeDistances},
		{Key: "use_graph_retrieval", Label: "Graph retrieval", Type: "boolean", Default: cur.UseGraph},
		{Key: "graph_entity_top_k", Label: "Graph seed entities", Type: "number", Default: cur.GraphEntityTopK, Min: f(1), Max: f(100), Step: f(1), DependOn: "use_graph_retrieval=true"},
		{Key: "graph_depth", Label: "Graph hops", Type: "number", Default: cur.GraphDepth, Min: f(1), Max: f(3), Step: f(1), DependOn: "use_graph_retrieval=true"},
		{Key: "graph_max_nodes", Label: "Graph subgraph nodes", Type: "number", Default: cur.GraphMaxNodes, Min: f(10), Max: f(10000), Step: f(10), DependOn: "use_graph_retrieval=true"},
		{Key: "graph_top_k", Label: "Graph chunks", Type: "number", Default: cur.GraphTopK, Min: f(1), Max: f(200), Step: f(1), DependOn: "use_graph_retrieval=true"},
		{Key: "graph_weight", Label: "Graph fusion weight", Type: "number", Default: cur.GraphWeight, Min: f(0), Max: f(10), Step: f(0.1), DependOn: "use_graph_retrieval=true"},
		{Key: "ppr_damping", Label: "PageRank damping", Type: "number", Default: cur.PPRDamping, Min: f(0.05), Max: f(0.99), Step: f(0.01), DependOn: "use_graph_retrieval=true"},
	}
}

// Validate checks ranges.
func (r Retrieval) Validate() error {
	bad := func(format string, args ...any) error {
		return failure.Unprocessable("invalid_query_params", format, args...)
	}
	switch r.SearchMode {
	case "vector", "keyword", "hybrid":
	default:
		return bad("search_mode must be vector, keyword or hybrid")
	}
	switch r.Fusion {
	case "weighted", "rrf":
	default:
		return bad("fusion must be weighted or rrf")
	}
	switch {
	case r.FinalTopK < 1 || r.FinalTopK > 100:
		return bad("final_top_k must be between 1 and 100")
	case r.BM25TopK < 1 || r.BM25TopK > 200:
		return bad("bm25_top_k must be between 1 and 200")
	case r.RecallTopK < 1 || r.RecallTopK > 200:
		return bad("recall_top_k must be between 1 and 200")
	case r.SimilarityThreshold < 0 || r.SimilarityThreshold > 1 || math.IsNaN(r.SimilarityThreshold):
		return bad("similarity_threshold must be between 0 and 1")
	case r.VectorWeight < 0 || r.BM25Weight < 0 || r.VectorWeight+r.BM25Weight == 0:
		return bad("vector_weight and bm25_weight must be non-negative and not both 0")
	case r.RRFK < 1 || r.RRFK > 1000:
		return bad("rrf_k must be between 1 and 1000")
	case r.UseReranker && r.RerankerModel == "":
		return bad("use_reranker needs reranker_model (provider_id:model_id)")
	case r.GraphEntityTopK < 1 || r.GraphEntityTopK > 100:
		return bad("graph_entity_top_k must be between 1 and 100")
	case r.GraphDepth < 1 || r.GraphDepth > 3:
		return bad("graph_depth must be between 1 and 3")
	case r.GraphMaxNodes < 10 || r.GraphMaxNodes > 10000:
		return bad("graph_max_nodes must be between 10 and 10000")
	case r.GraphTopK < 1 || r.GraphTopK > 200:
		return bad("graph_top_k must be between 1 and 200")
	case r.GraphWeight < 0 || r.GraphWeight > 10 || math.IsNaN(r.GraphWeight):
		return bad("graph_weight must be between 0 and 10")
	case r.PPRDamping < 0.05 || r.PPRDamping > 0.99 || math.IsNaN(r.PPRDamping):
		return bad("ppr_damping must be between 0.05 and 0.99")
	}
	return nil
}

// Overlay applies the keys present in raw (a JSON object) onto r, strictly:
// unknown keys and wrong types are errors.
func (r Retrieval) Overlay(raw json.RawMessage) (Retrieval, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return r, nil
	}
	raw = aliasUseGraph(raw)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, failure.Unprocessable("invalid_query_params", "retrieval options: %v", err)
	}
	return r, r.Validate()
}

// aliasUseGraph accepts "use_graph" as another name of
// "use_graph_retrieval" (the original's name wins when both are given).
func aliasUseGraph(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	v, ok := m["use_graph"]
	if !ok {
		return raw
	}
	delete(m, "use_graph")
	if _, both := m["use_graph_retrieval"]; !both {
		m["use_graph_retrieval"] = v
	}
	out, _ := json.Marshal(m)
	return out
}

// Retrieval returns the KB's saved retrieval options over the defaults.
func (k KB) Retrieval() Retrieval {
	var doc struct {
		Options json.RawMessage `json:"options"`
	}
	_ = json.Unmarshal(k.QueryParams, &doc)
	r := DefaultRetrievalFor(k.EmbeddingModelSpec)
	if err := json.Unmarshal(doc.Options, &r); err != nil || r.Validate() != nil {
		return DefaultRetrievalFor(k.EmbeddingModelSpec)
	}
	return r
}

// normalizeQueryParams validates {options:{…}} for storage.
func normalizeQueryParams(raw json.RawMessage, embeddingModelSpec string) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return json.RawMessage(`{"options":{}}`), nil
	}
	var doc struct {
		Options json.RawMessage `json:"options"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, failure.Unprocessable("invalid_query_params", "query_params must be {\"options\": {…}}")
	}
	r, err := DefaultRetrievalFor(embeddingModelSpec).Overlay(doc.Options)
	if err != nil {
		return nil, err
	}
	opts, _ := json.Marshal(r)
	return json.RawMessage(fmt.Sprintf(`{"options":%s}`, opts)), nil
}

// Chunking is the chunking of a KB or a file: preset and parser config.
type Chunking struct {
	PresetID string       `json:"chunk_preset_id"`
	Config   chunk.Config `json:"chunk_parser_config"`
}

// normalizeAdditional validates additional_params' chunk settings (other keys are kept).
func normalizeAdditional(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, failure.Unprocessable("invalid_additional_params", "additional_params must be an object")
	}
	if v, ok := m["chunk_preset_id"]; ok {
		var id string
		if err := json.Unmarshal(v, &id); err != nil {
			return nil, failure.Unprocessable("invalid_additional_params", "chunk_preset_id must be a string")
		}
		b, _ := json.Marshal(chunk.ResolvePreset(id))
		m["chunk_preset_id"] = b
	}
	if v, ok := m["chunk_parser_config"]; ok {
		c, err := chunk.ParseConfig(v)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(c)
		m["chunk_parser_config"] = b
	}
	out, _ := json.Marshal(m)
	return out, nil
}

// ResolveChunking picks the chunking for a file: request > file's
// processing_params > KB's additional_params > defaults.
func ResolveChunking(layers ...json.RawMessage) (Chunking, error) {
	c := Chunking{PresetID: "general", Config: chunk.DefaultConfig()}
	for _, raw := range layers {
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return c, failure.Unprocessable("invalid_chunk_config", "chunk settings must be an object")
		}
		if v, ok := m["chunk_preset_id"]; ok {
			var id string
			if json.Unmarshal(v, &id) == nil {
				c.PresetID = chunk.ResolvePreset(id)
			}
		}
		if v, ok := m["chunk_parser_config"]; ok && string(v) != "null" {
			cfg, err := chunk.ParseConfig(v)
			if err != nil {
				return c, err
			}
			c.Config = cfg
		}
	}
	return c, nil
}

// SetRetrieval saves a KB's retrieval options (manage access). Keys absent
// from raw keep their saved values; concurrent partial updates do not lose
// each other's keys (the row is locked while merging).
func (s *Store) SetRetrieval(ctx context.Context, sub access.Subject, kbID string, raw json.RawMessage) (Retrieval, error) {
	var out Retrieval
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		k, err := s.GetManagedTx(ctx, tx, sub, kbID)
		if err != nil {
			return err
		}
		var cur json.RawMessage
		if err := tx.QueryRow(ctx, `SELECT query_params FROM knowledge_bases WHERE kb_id = $1 FOR UPDATE`, kbID).Scan(&cur); err != nil {
			return err
		}
		k.QueryParams = cur
		if out, err = k.Retrieval().Overlay(raw); err != nil {
			return err
		}
		opts, _ := json.Marshal(out)
		_, err = tx.Exec(ctx, `UPDATE knowledge_bases SET query_params = $2, updated_at = now() WHERE kb_id = $1`,
			kbID, fmt.Sprintf(`{"options":%s}`, opts))
		return err
	})
	return out, err
}
