package kb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/embed"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/vector"
)

// fixedEmbedder maps known texts to fixed vectors, so that every cosine in
// the tests is known exactly.
type fixedEmbedder struct {
	vecs map[string][]float32
	err  error
}

func (f fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v, ok := f.vecs[s]
		if !ok {
			return nil, fmt.Errorf("fixedEmbedder: no vector for %q", s)
		}
		out[i] = v
	}
	return out, nil
}
func (f fixedEmbedder) Dim() int      { return testDim }
func (f fixedEmbedder) Model() string { return "test:fixed" }

// testModels serves the embedder and an OpenAI-style reranker at rerankURL
// (spec "rr:<model>").
type testModels struct {
	em        embed.Embedder
	rerankURL string
}

func (m testModels) Embedder(spec string, dim int) (embed.Embedder, error) {
	if spec != "test:fixed" || dim != testDim {
		return nil, failure.Unprocessable("unknown_model", "no embedder %s/%d", spec, dim)
	}
	return m.em, nil
}

func (m testModels) Reranker(spec string) (embed.Reranker, error) {
	model, ok := strings.CutPrefix(spec, "rr:")
	if !ok || m.rerankURL == "" {
		return nil, failure.Unprocessable("unknown_model", "no reranker %s", spec)
	}
	return embed.NewOpenAIReranker(embed.OpenAIRerankerConfig{BaseURL: m.rerankURL + "/v1", Model: model, MaxRetries: -1})
}

// The corpus: four chunks in two files, the query "solar" embedded as the
// x axis, so that each chunk's cosine is its vector's x component.
var corpus = []struct {
	name, file, content string
	vec                 []float32
	cos                 float64
}{
	{"c1", "energy.md", "solar panels convert sunlight", []float32{0.6, 0.8, 0}, 0.6},
	{"c2", "energy.md", "wind turbines convert wind", []float32{0.8, 0.6, 0}, 0.8},
	{"c3", "heat.md", "solar heating water", []float32{0, 1, 0}, 0},
	{"c4", "heat.md", "nuclear power plants", []float32{-1, 0, 0}, -1},
}

var queryVecs = map[string][]float32{"solar": {1, 0, 0}, "nothing matches this": {0, 0, 1}}

// bm25 is keyword.Search's documented scoring (k1 0.9, b 0.4) of a
// one-term query: tf occurrences in a document of dl terms, df documents of
// n containing the term, mean length avgdl.
func bm25(tf, dl, df, n int, avgdl float64) float64 {
	const k1, b = 0.9, 0.4
	idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
	return idf * float64(tf) * (k1 + 1) / (float64(tf) + k1*(1-b+b*float64(dl)/avgdl))
}

// The corpus' BM25 scores for "solar" (simple analyzer: c1 and c3 have 4 and
// 3 terms; 14 terms in 4 documents).
var (
	bm25c1 = bm25(1, 4, 2, 4, 3.5)
	bm25c3 = bm25(1, 3, 2, 4, 3.5)
)

// weighted is the WeightedRanker fusion of a cosine and a BM25 score (nil: absent).
func weighted(cos, bm *float64, vw, bw float64) float64 {
	s := 0.0
	if cos != nil {
		s += vw * (1 + *cos) / 2
	}
	if bm != nil {
		s += bw * 2 * math.Atan(*bm) / math.Pi
	}
	return s / (vw + bw)
}

func ptr(f float64) *float64 { return &f }

type retrieval struct {
	*env
	k   kb.KB
	ids map[string]string // corpus name → chunk id
	rt  *kb.Retriever
}

// newRetrieval indexes the corpus into a new KB (chunks, keyword index,
// vectors) and returns a retriever over it whose reranker talks to rerankURL.
func newRetrieval(t *testing.T, e *env, rerankURL string) *retrieval {
	t.Helper()
	k := e.createKB(t, kb.CreateInput{})
	r := &retrieval{env: e, k: k, ids: map[string]string{}}
	byFile := map[string][]int{}
	for i, c := range corpus {
		byFile[c.file] = append(byFile[c.file], i)
	}
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"energy.md", "heat.md"} {
		var contents []string
		for _, i := range byFile[file] {
			contents = append(contents, corpus[i].content)
		}
		f, cs := e.ingest(t, k.KBID, file, contents...)
		var items []vector.Item
		for j, i := range byFile[file] {
			r.ids[corpus[i].name] = cs[j].ID
			items = append(items, vector.Item{ID: cs[j].ID, Group: f.FileID, Vector: corpus[i].vec})
		}
		if err := e.vec.Upsert(e.ctx, k.KBID, items); err != nil {
			t.Fatal(err)
		}
	}
	r.rt = kb.NewRetriever(e.pool, e.vec, e.kw, testModels{em: fixedEmbedder{vecs: queryVecs}, rerankURL: rerankURL})
	return r
}

func (r *retrieval) query(t *testing.T, q string, opt kb.Retrieval, fileName string) []kb.Result {
	t.Helper()
	res, err := r.rt.Query(r.ctx, r.k, q, opt, fileName)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return res
}

// names maps results back to corpus names.
func (r *retrieval) names(res []kb.Result) []string {
	byID := map[string]string{}
	for n, id := range r.ids {
		byID[id] = n
	}
	out := make([]string, len(res))
	for i, x := range res {
		out[i] = byID[x.ID]
		if out[i] == "" {
			out[i] = x.ID
		}
	}
	return out
}

const eps = 1e-6

func near(a, b float64) bool { return math.Abs(a-b) < eps }

// check compares results with expected names and scores, in order.
func (r *retrieval) check(t *testing.T, what string, res []kb.Result, names []string, scores []float64) {
	t.Helper()
	got := r.names(res)
	if !slices.Equal(got, names) {
		t.Fatalf("%s: results %v, want %v", what, got, names)
	}
	for i, s := range scores {
		if !near(res[i].Score, s) {
			t.Fatalf("%s: %s scored %.9f, want %.9f", what, names[i], res[i].Score, s)
		}
	}
}

func opts(mut func(*kb.Retrieval)) kb.Retrieval {
	o := kb.DefaultRetrieval()
	if mut != nil {
		mut(&o)
	}
	return o
}

func testRetrieveModes(t *testing.T, e *env) {
	r := newRetrieval(t, e, "")
	if bm25c3 <= bm25c1 {
		t.Fatalf("corpus assumption: the shorter c3 outranks c1 in BM25 (%v vs %v)", bm25c3, bm25c1)
	}

	t.Run("vector", func(t *testing.T) {
		res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector" }), "")
		// c4 (cosine −1) falls below the default threshold 0.
		r.check(t, "vector", res, []string{"c2", "c1", "c3"}, []float64{0.8, 0.6, 0})
		if res[0].Distance == nil || !near(*res[0].Distance, 0.2) || res[0].BM25Score != nil || res[0].HybridScore != nil {
			t.Fatalf("vector result fields: %+v", res[0])
		}
		md := res[0].Metadata
		if md["source"] != "energy.md" || md["chunk_id"] != r.ids["c2"] || md["chunk_index"] != 1 || md["file_id"] != res[0].FileID ||
			res[0].KBID != r.k.KBID || res[0].Content != "wind turbines convert wind" {
			t.Fatalf("vector result = %+v", res[0])
		}
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector"; o.IncludeDistances = false }), "")
		if res[0].Distance != nil || res[0].Metadata["distance"] != nil {
			t.Fatalf("distance without include_distances: %+v", res[0])
		}
	})

	t.Run("keyword", func(t *testing.T) {
		// The similarity threshold does not apply to BM25 scores.
		res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "keyword"; o.SimilarityThreshold = 0.99 }), "")
		r.check(t, "keyword", res, []string{"c3", "c1"}, []float64{bm25c3, bm25c1})
		if res[0].BM25Score == nil || !near(*res[0].BM25Score, bm25c3) || res[0].Distance != nil {
			t.Fatalf("keyword result fields: %+v", res[0])
		}
	})

	t.Run("hybrid weighted", func(t *testing.T) {
		res := r.query(t, "solar", opts(nil), "")
		want := []float64{
			weighted(ptr(0.6), &bm25c1, 0.7, 0.3),
			0.63, // 0.7 · (1+0.8)/2, no BM25 hit
			weighted(ptr(0), &bm25c3, 0.7, 0.3),
			0, // cosine −1, no BM25 hit
		}
		r.check(t, "hybrid", res, []string{"c1", "c2", "c3", "c4"}, want)
		if res[0].HybridScore == nil || !near(*res[0].HybridScore, want[0]) || res[0].BM25Score == nil || res[0].Distance == nil {
			t.Fatalf("hybrid result fields: %+v", res[0])
		}
		// Other weights are normalised by their sum.
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.VectorWeight, o.BM25Weight = 1, 3 }), "")
		r.check(t, "hybrid 1:3", res, []string{"c1", "c3", "c2", "c4"}, []float64{
			weighted(ptr(0.6), &bm25c1, 1, 3), weighted(ptr(0), &bm25c3, 1, 3), 0.225, 0})
		// Keyword-only weight: chunks without a BM25 hit score 0.
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.VectorWeight, o.BM25Weight = 0, 1 }), "")
		r.check(t, "hybrid 0:1", res[:2], []string{"c3", "c1"}, []float64{2 * math.Atan(bm25c3) / math.Pi, 2 * math.Atan(bm25c1) / math.Pi})
	})

	t.Run("hybrid rrf", func(t *testing.T) {
		// Vector ranks: c2 c1 c3 c4; BM25 ranks: c3 c1.
		res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.Fusion = "rrf" }), "")
		r.check(t, "rrf k=60", res, []string{"c3", "c1", "c2", "c4"},
			[]float64{1.0/63 + 1.0/61, 1.0/62 + 1.0/62, 1.0 / 61, 1.0 / 64})
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.Fusion, o.RRFK = "rrf", 1 }), "")
		r.check(t, "rrf k=1", res, []string{"c3", "c1", "c2", "c4"}, []float64{1.0/4 + 1.0/2, 1.0/3 + 1.0/3, 1.0 / 2, 1.0 / 5})
	})

	t.Run("threshold", func(t *testing.T) {
		res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector"; o.SimilarityThreshold = 0.5 }), "")
		r.check(t, "vector ≥ 0.5", res, []string{"c2", "c1"}, nil)
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SimilarityThreshold = 0.5 }), "")
		r.check(t, "hybrid ≥ 0.5", res, []string{"c1", "c2"}, nil)
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SimilarityThreshold = 1 }), "")
		if len(res) != 0 {
			t.Fatalf("threshold 1 kept %v", r.names(res))
		}
	})

	t.Run("top k", func(t *testing.T) {
		res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.FinalTopK = 2 }), "")
		r.check(t, "final_top_k 2", res, []string{"c1", "c2"}, nil)
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector"; o.FinalTopK = 1 }), "")
		r.check(t, "vector final_top_k 1", res, []string{"c2"}, nil)
		// bm25_top_k 1: only c3 gets BM25 credit, so c1 falls behind c2.
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.BM25TopK = 1 }), "")
		r.check(t, "bm25_top_k 1", res, []string{"c2", "c1", "c3", "c4"},
			[]float64{0.63, 0.56, weighted(ptr(0), &bm25c3, 0.7, 0.3), 0})
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "keyword"; o.BM25TopK = 1 }), "")
		r.check(t, "keyword bm25_top_k 1", res, []string{"c3"}, nil)
		// recall_top_k bounds the vector candidates of hybrid search: with one
		// candidate c1 keeps only its BM25 credit and c2 wins.
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.FinalTopK, o.RecallTopK = 1, 1 }), "")
		r.check(t, "recall 1", res, []string{"c2"}, []float64{0.63})
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.FinalTopK, o.RecallTopK = 1, 2 }), "")
		r.check(t, "recall 2", res, []string{"c1"}, []float64{weighted(ptr(0.6), &bm25c1, 0.7, 0.3)})
	})

	t.Run("file name", func(t *testing.T) {
		res := r.query(t, "solar", opts(nil), "HEAT")
		r.check(t, "hybrid in heat.md", res, []string{"c3", "c4"}, []float64{weighted(ptr(0), &bm25c3, 0.7, 0.3), 0})
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "keyword" }), "energy")
		r.check(t, "keyword in energy.md", res, []string{"c1"}, []float64{bm25c1})
		res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector" }), "energy.md")
		r.check(t, "vector in energy.md", res, []string{"c2", "c1"}, nil)
		if res := r.query(t, "solar", opts(nil), "no-such-file"); res == nil || len(res) != 0 {
			t.Fatalf("unknown file name = %#v, want an empty list", res)
		}
	})

}

// TestRetrieveDropsStaleVectors: a vector that outlived its chunk is never returned.
func testRetrieveDropsStaleVectors(t *testing.T, e *env) {
	r := newRetrieval(t, e, "")
	stale := r.ids["c1"][:len("file_")+24] + "_deadbeefdeadbeef"
	if err := r.vec.Upsert(r.ctx, r.k.KBID, []vector.Item{{ID: stale, Group: "g", Vector: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	res := r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector" }), "")
	r.check(t, "vector", res, []string{"c2", "c1", "c3"}, nil)

	// Many vectors without a chunk (an indexing attempt in flight) nearer than
	// every committed one: the search widens past them instead of coming back short.
	var items []vector.Item
	for i := range 40 {
		items = append(items, vector.Item{ID: fmt.Sprintf("%s_%016x", r.ids["c1"][:len("file_")+24], i+1), Group: "g", Vector: []float32{1, 0, 0}})
	}
	if err := r.vec.Upsert(r.ctx, r.k.KBID, items); err != nil {
		t.Fatal(err)
	}
	res = r.query(t, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "vector"; o.FinalTopK = 2 }), "")
	r.check(t, "vector past 40 uncommitted vectors", res, []string{"c2", "c1"}, nil)
}

// TestRetrieveEmptyKB: a KB with nothing indexed yet has no vector
// collection; a query answers no results, in every mode.
func testRetrieveEmptyKB(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	rt := kb.NewRetriever(e.pool, e.vec, e.kw, testModels{em: fixedEmbedder{vecs: queryVecs}})
	for _, mode := range []string{"vector", "keyword", "hybrid"} {
		res, err := rt.Query(e.ctx, k, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = mode }), "")
		if err != nil || res == nil || len(res) != 0 {
			t.Fatalf("%s query of an empty KB = %#v, %v; want an empty list", mode, res, err)
		}
	}
}

// rerankServer speaks POST /v1/rerank: it scores each document by the
// position of its first "w" (later is better) unless fail is set.
type rerankServer struct {
	mu     sync.Mutex
	bodies []map[string]any
	fail   int // HTTP status to answer with; 0: answer normally
	badIdx bool
}

func (s *rerankServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/rerank" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body struct {
		Model     string   `json:"model"`
		Query     string   `json:"query"`
		Documents []string `json:"documents"`
		TopN      int      `json:"top_n"`
	}
	raw := map[string]any{}
	if err := json.NewDecoder(req.Body).Decode(&raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &body)
	s.mu.Lock()
	s.bodies = append(s.bodies, raw)
	fail, badIdx := s.fail, s.badIdx
	s.mu.Unlock()
	if fail != 0 {
		http.Error(w, `{"error":{"message":"reranker overloaded"}}`, fail)
		return
	}
	type result struct {
		Index int     `json:"index"`
		Score float64 `json:"relevance_score"`
	}
	var results []result
	for i, d := range body.Documents {
		results = append(results, result{Index: i, Score: float64(strings.Index(d+"w", "w")) / 100})
	}
	if badIdx {
		results[0].Index = len(body.Documents) + 3
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}

func testRetrieveRerank(t *testing.T, e *env) {
	srv := &rerankServer{}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	r := newRetrieval(t, e, hs.URL)
	rerank := func(o *kb.Retrieval) {
		o.UseReranker, o.RerankerModel, o.RecallTopK, o.FinalTopK = true, "rr:bge-reranker", 3, 2
	}

	// Fused order c1 c2 c3 (recall 3) → reranked by the position of "w":
	// c1 "solar panels convert sunlight" has none (29 characters → 0.29),
	// c3 "solar heating water" 0.14, c2 "wind…" 0.
	res := r.query(t, "solar", opts(rerank), "")
	r.check(t, "rerank", res, []string{"c1", "c3"}, []float64{0.29, 0.14})
	if res[0].RerankScore == nil || !near(*res[0].RerankScore, 0.29) || res[0].Metadata["rerank_score"] != 0.29 ||
		res[0].HybridScore == nil {
		t.Fatalf("reranked result fields: %+v", res[0])
	}
	srv.mu.Lock()
	body := srv.bodies[0]
	srv.mu.Unlock()
	docs, _ := body["documents"].([]any)
	if body["model"] != "bge-reranker" || body["query"] != "solar" || body["top_n"] != float64(3) || len(docs) != 3 ||
		docs[0] != corpus[0].content || docs[1] != corpus[1].content || docs[2] != corpus[2].content {
		t.Fatalf("rerank request = %v", body)
	}

	// Vector mode reranks its recall_top_k candidates too.
	res = r.query(t, "solar", opts(func(o *kb.Retrieval) { rerank(o); o.SearchMode = "vector"; o.FinalTopK = 3 }), "")
	r.check(t, "vector rerank", res, []string{"c1", "c3", "c2"}, []float64{0.29, 0.14, 0})

	for _, c := range []struct {
		name string
		set  func()
	}{
		{"server error", func() { srv.fail = http.StatusServiceUnavailable }},
		{"bad index", func() { srv.fail, srv.badIdx = 0, true }},
	} {
		srv.mu.Lock()
		c.set()
		srv.mu.Unlock()
		res, err := r.rt.Query(r.ctx, r.k, "solar", opts(rerank), "")
		if err == nil || !strings.Contains(err.Error(), "rerank") {
			t.Fatalf("%s: Query = %v, %v; want the rerank error", c.name, r.names(res), err)
		}
	}
	_, err := r.rt.Query(r.ctx, r.k, "solar", opts(func(o *kb.Retrieval) { rerank(o); o.RerankerModel = "nope:x" }), "")
	wantCode(t, err, failure.KindUnprocessable, "unknown_model")
}

func testRetrieveErrors(t *testing.T, e *env) {
	r := newRetrieval(t, e, "")
	bad := map[string]func(*kb.Retrieval){
		"search_mode":          func(o *kb.Retrieval) { o.SearchMode = "fuzzy" },
		"fusion":               func(o *kb.Retrieval) { o.Fusion = "max" },
		"final_top_k 0":        func(o *kb.Retrieval) { o.FinalTopK = 0 },
		"final_top_k 101":      func(o *kb.Retrieval) { o.FinalTopK = 101 },
		"bm25_top_k":           func(o *kb.Retrieval) { o.BM25TopK = 201 },
		"recall_top_k":         func(o *kb.Retrieval) { o.RecallTopK = 0 },
		"threshold":            func(o *kb.Retrieval) { o.SimilarityThreshold = 1.5 },
		"threshold NaN":        func(o *kb.Retrieval) { o.SimilarityThreshold = math.NaN() },
		"negative weight":      func(o *kb.Retrieval) { o.VectorWeight = -0.1 },
		"zero weights":         func(o *kb.Retrieval) { o.VectorWeight, o.BM25Weight = 0, 0 },
		"rrf_k":                func(o *kb.Retrieval) { o.RRFK = 0 },
		"reranker needs model": func(o *kb.Retrieval) { o.UseReranker = true },
	}
	for name, mut := range bad {
		res, err := r.rt.Query(r.ctx, r.k, "solar", opts(mut), "")
		if res != nil {
			t.Errorf("%s: results %v", name, res)
		}
		fe, ok := failure.As(err)
		if !ok || fe.Kind != failure.KindUnprocessable || fe.Code != "invalid_query_params" {
			t.Errorf("%s: error %v, want 422 invalid_query_params", name, err)
		}
	}
	_, err := r.rt.Query(r.ctx, r.k, "  \n", opts(nil), "")
	wantCode(t, err, failure.KindUnprocessable, "empty_query")
	_, err = r.rt.Query(r.ctx, r.k, strings.Repeat("x", 8001), opts(nil), "")
	wantCode(t, err, failure.KindUnprocessable, "query_too_long")

	// Failures of the models are reported, not turned into "no results".
	down := errors.New("embedding provider down")
	rt := kb.NewRetriever(r.pool, r.vec, r.kw, testModels{em: fixedEmbedder{err: down}})
	if res, err := rt.Query(r.ctx, r.k, "solar", opts(nil), ""); !errors.Is(err, down) {
		t.Fatalf("embedder failure: %v, %v", res, err)
	}
	// Keyword mode does not embed at all.
	if res, err := rt.Query(r.ctx, r.k, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "keyword" }), ""); err != nil || len(res) != 2 {
		t.Fatalf("keyword query with a broken embedder: %v, %v", res, err)
	}
	wrongDim := fixedEmbedder{vecs: map[string][]float32{"solar": {1, 0}}}
	rt = kb.NewRetriever(r.pool, r.vec, r.kw, testModels{em: wrongDim})
	_, err = rt.Query(r.ctx, r.k, "solar", opts(nil), "")
	wantCode(t, err, failure.KindUnprocessable, "embedding_dimension_mismatch")
	k := r.k
	k.EmbeddingModelSpec = "other:model"
	_, err = r.rt.Query(r.ctx, k, "solar", opts(nil), "")
	wantCode(t, err, failure.KindUnprocessable, "unknown_model")
	ctx, cancel := context.WithCancel(r.ctx)
	cancel()
	if res, err := r.rt.Query(ctx, r.k, "solar", opts(func(o *kb.Retrieval) { o.SearchMode = "keyword" }), ""); err == nil {
		t.Fatalf("cancelled query = %v, no error", res)
	}
}

func TestSearchOutput(t *testing.T) {
	t.Parallel()
	res := []kb.Result{{ID: "c", KBID: "kb", FileID: "f", Content: "text",
		Metadata: map[string]any{"source": "a.md", "path": "/secret", "filepath": "/x", "object_key": "k", "score": 0.5}}}
	out := kb.SearchOutput("kb", res)
	if out.KBID != "kb" || len(out.Results) != 1 {
		t.Fatalf("SearchOutput = %+v", out)
	}
	md := out.Results[0].Metadata
	if md["source"] != "a.md" || md["score"] != 0.5 || md["path"] != nil || md["filepath"] != nil || md["object_key"] != nil {
		t.Fatalf("metadata = %v", md)
	}
	if res[0].Metadata["path"] != "/secret" {
		t.Fatal("SearchOutput changed its input")
	}
	if out := kb.SearchOutput("kb", nil); out.Results == nil {
		t.Fatal("no results must encode as [] not null")
	}
}

// hashEmbedder embeds any text as a deterministic unit vector of testDim
// (from its FNV hash), so that every query of a generated corpus has one.
type hashEmbedder struct{}

func (hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = hashVec(s)
	}
	return out, nil
}
func (hashEmbedder) Dim() int      { return testDim }
func (hashEmbedder) Model() string { return "test:fixed" }

func hashVec(s string) []float32 {
	h := fnv.New64a()
	h.Write([]byte(s))
	x := h.Sum64()
	v := []float64{float64(x&0xffff) - 32768, float64(x>>16&0xffff) - 32768, float64(x>>32&0xffff) - 32768}
	n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
	if n == 0 {
		return []float32{1, 0, 0}
	}
	return []float32{float32(v[0] / n), float32(v[1] / n), float32(v[2] / n)}
}

// QueryMany answers every query exactly as Query does, one by one: the
// same results (ids, contents, scores, metadata) in the same order, and
// the same per-query errors, in every search mode, over a generated KB of
// 240 chunks in 6 files with the real keyword index and vectors.
func testRetrieveQueryMany(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{})
	if err := e.vec.EnsureCollection(e.ctx, k.KBID, testDim); err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(`solar wind water heat power grid panel turbine storage battery cell hydrogen nuclear coal gas
		oil plant station energy current voltage cable network demand supply price market policy carbon climate
		emission efficiency loss transfer pump valve pipe boiler steam engine motor rotor blade tower`)
	rng := rand.New(rand.NewPCG(7, 11))
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	for f := range 6 {
		contents := make([]string, 40)
		for i := range contents {
			contents[i] = fmt.Sprintf("chunk %d of file %d: %s", i, f, text(8+rng.IntN(40)))
		}
		file, cs := e.ingest(t, k.KBID, fmt.Sprintf("gen-%d.md", f), contents...)
		items := make([]vector.Item, len(cs))
		for i, c := range cs {
			items[i] = vector.Item{ID: c.ID, Group: file.FileID, Vector: hashVec(contents[i])}
		}
		if err := e.vec.Upsert(e.ctx, k.KBID, items); err != nil {
			t.Fatal(err)
		}
	}
	queries := []string{"", "   ", strings.Repeat("x", 8001), "the of and", "zzz unknown"}
	for range 25 {
		queries = append(queries, text(1+rng.IntN(6)))
	}
	queries = append(queries, queries[7]) // a query twice
	rt := kb.NewRetriever(e.pool, e.vec, e.kw, testModels{em: hashEmbedder{}})
	for _, mode := range []string{"keyword", "vector", "hybrid"} {
		for _, fusion := range []string{"weighted", "rrf"} {
			opt := opts(func(o *kb.Retrieval) { o.SearchMode, o.Fusion, o.FinalTopK, o.IncludeDistances = mode, fusion, 7, true })
			res, errs := rt.QueryMany(e.ctx, k, queries, opt)
			if len(res) != len(queries) || len(errs) != len(queries) {
				t.Fatalf("%s/%s: %d results and %d errors for %d queries", mode, fusion, len(res), len(errs), len(queries))
			}
			nonEmpty := 0
			for i, q := range queries {
				want, wantErr := rt.Query(e.ctx, k, q, opt, "")
				if fmt.Sprint(errs[i]) != fmt.Sprint(wantErr) {
					t.Fatalf("%s/%s query %d %.20q: error %v, Query's %v", mode, fusion, i, q, errs[i], wantErr)
				}
				got, _ := json.Marshal(res[i])
				exp, _ := json.Marshal(want)
				if string(got) != string(exp) {
					t.Fatalf("%s/%s query %d %q:\nQueryMany %s\nQuery     %s", mode, fusion, i, q, got, exp)
				}
				if len(want) > 0 {
					nonEmpty++
				}
			}
			if nonEmpty < 20 {
				t.Fatalf("%s/%s: only %d queries found anything: the corpus tests too little", mode, fusion, nonEmpty)
			}
		}
	}
	// A bad option fails every query, as Query does.
	bad := opts(func(o *kb.Retrieval) { o.FinalTopK = 0 })
	_, errs := rt.QueryMany(e.ctx, k, queries[5:8], bad)
	for i, err := range errs {
		wantCode(t, err, failure.KindUnprocessable, "invalid_query_params")
		if i > 2 {
			t.Fatal("too many errors")
		}
	}
}
