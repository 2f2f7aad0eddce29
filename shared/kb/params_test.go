package kb_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

func TestDefaultRetrieval(t *testing.T) {
	t.Parallel()
	d := kb.DefaultRetrieval()
	want := kb.Retrieval{SearchMode: "hybrid", FinalTopK: 10, SimilarityThreshold: 0, BM25TopK: 50, VectorWeight: 0.7,
		BM25Weight: 0.3, Fusion: "weighted", RRFK: 60, RecallTopK: 50, IncludeDistances: true,
		GraphEntityTopK: 10, GraphDepth: 2, GraphMaxNodes: 2000, GraphTopK: 20, GraphWeight: 1, PPRDamping: 0.85}
	if d != want {
		t.Fatalf("DefaultRetrieval = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	// KBs embedding with an offline (lexical) builtin embedder search by
	// keyword by default, saved options or not; others get the hybrid default.
	lexical := kb.DefaultRetrievalFor("builtin:hash-ngram-256")
	if want := d; lexical.SearchMode != "keyword" || func() bool { want.SearchMode = "keyword"; return lexical != want }() {
		t.Fatalf("DefaultRetrievalFor(builtin) = %+v", lexical)
	}
	if got := kb.DefaultRetrievalFor("openai:text-embedding-3-small"); got != d {
		t.Fatalf("DefaultRetrievalFor(provider) = %+v", got)
	}
	if got := (kb.KB{EmbeddingModelSpec: "builtin:hash-ngram-256"}).Retrieval(); got != lexical {
		t.Fatalf("a builtin-embedding KB without saved options retrieves with %+v", got)
	}
	saved := kb.KB{EmbeddingModelSpec: "builtin:hash-ngram-256", QueryParams: json.RawMessage(`{"options":{"final_top_k":3}}`)}
	if got := saved.Retrieval(); got.SearchMode != "keyword" || got.FinalTopK != 3 {
		t.Fatalf("partial saved options over the builtin default = %+v", got)
	}
	// Every option GET /query-params describes is a field of Retrieval and
	// vice versa, and its default is the current value.
	cur := d
	cur.FinalTopK, cur.Fusion = 7, "rrf"
	var fields map[string]any
	b, _ := json.Marshal(cur)
	_ = json.Unmarshal(b, &fields)
	var keys []string
	for _, o := range kb.ParamOptions(cur) {
		keys = append(keys, o.Key)
		v, ok := fields[o.Key]
		if !ok {
			t.Fatalf("option %s is not a retrieval field", o.Key)
		}
		dj, _ := json.Marshal(o.Default)
		if !jsonEqual(dj, mustJSON(v)) {
			t.Fatalf("option %s default = %v, current value %v", o.Key, o.Default, v)
		}
	}
	if len(keys) != len(fields) {
		t.Fatalf("options %v, fields %v", keys, fields)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRetrievalOverlayPrecedence: request meta over the KB's saved
// query_params over the defaults.
func testRetrievalOverlayPrecedence(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{QueryParams: json.RawMessage(`{"options":{"final_top_k":5,"search_mode":"vector","fusion":"rrf"}}`)})
	saved := k.Retrieval()
	want := kb.DefaultRetrieval()
	want.FinalTopK, want.SearchMode, want.Fusion = 5, "vector", "rrf"
	if saved != want {
		t.Fatalf("KB retrieval = %+v, want %+v", saved, want)
	}
	got, err := saved.Overlay(json.RawMessage(`{"final_top_k":3,"similarity_threshold":0.4,"use_reranker":true,"reranker_model":"p:m"}`))
	if err != nil {
		t.Fatal(err)
	}
	want.FinalTopK, want.SimilarityThreshold, want.UseReranker, want.RerankerModel = 3, 0.4, true, "p:m"
	if got != want {
		t.Fatalf("overlay = %+v, want %+v", got, want)
	}
	for _, empty := range []string{"", "null", "  "} {
		if got, err := saved.Overlay(json.RawMessage(empty)); err != nil || got != saved {
			t.Fatalf("overlay of %q = %+v, %v", empty, got, err)
		}
	}
	// A reloaded KB reads the same saved options.
	again, err := e.store.Get(e.ctx, owner, k.KBID)
	if err != nil || again.Retrieval() != saved {
		t.Fatalf("reloaded retrieval = %+v, %v", again.Retrieval(), err)
	}

	for name, raw := range map[string]string{
		"unknown key":         `{"top_k":3}`,
		"wrong type":          `{"final_top_k":"3"}`,
		"out of range":        `{"final_top_k":0}`,
		"reranker sans model": `{"use_reranker":true}`,
		"not an object":       `[1]`,
		"bad mode":            `{"search_mode":"graph"}`,
	} {
		_, err := saved.Overlay(json.RawMessage(raw))
		if fe, ok := failure.As(err); !ok || fe.Kind != failure.KindUnprocessable || fe.Code != "invalid_query_params" {
			t.Errorf("overlay with %s: %v, want 422 invalid_query_params", name, err)
		}
	}

	// Options saved in an unreadable shape fall back to the defaults.
	e.exec(t, `UPDATE knowledge_bases SET query_params = '{"options":{"final_top_k":-1}}' WHERE kb_id = $1`, k.KBID)
	broken, _ := e.store.Get(e.ctx, owner, k.KBID)
	if broken.Retrieval() != kb.DefaultRetrieval() {
		t.Fatalf("broken options read as %+v", broken.Retrieval())
	}
}

func testCreateValidatesQueryParams(t *testing.T, e *env) {
	for _, raw := range []string{`{"options":{"final_top_k":1000}}`, `{"options":{"nope":1}}`, `"x"`} {
		_, err := e.store.Create(e.ctx, owner, kb.CreateInput{Name: "bad " + raw, QueryParams: json.RawMessage(raw)})
		wantCode(t, err, failure.KindUnprocessable, "invalid_query_params")
	}
	l, _ := e.store.List(e.ctx, owner)
	for _, k := range l {
		if strings.HasPrefix(k.Name, "bad ") {
			t.Fatalf("an invalid create left KB %q", k.Name)
		}
	}
	// Stored options are complete (defaults filled in).
	k := e.createKB(t, kb.CreateInput{QueryParams: json.RawMessage(`{"options":{"bm25_top_k":9}}`)})
	var doc struct {
		Options map[string]any `json:"options"`
	}
	if err := json.Unmarshal(k.QueryParams, &doc); err != nil || doc.Options["bm25_top_k"] != float64(9) ||
		doc.Options["search_mode"] != "hybrid" || len(doc.Options) != 19 || doc.Options["use_graph_retrieval"] != false {
		t.Fatalf("stored query_params = %s", k.QueryParams)
	}
}

// TestSetRetrieval: partial updates keep other keys, even when concurrent;
// invalid options and readers change nothing.
func testSetRetrieval(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{ShareConfig: json.RawMessage(`{"version":2,"read_scope":{"access_level":"global"}}`)})
	got, err := e.store.SetRetrieval(e.ctx, owner, k.KBID, json.RawMessage(`{"final_top_k":7}`))
	if err != nil || got.FinalTopK != 7 || got.SearchMode != "hybrid" {
		t.Fatalf("SetRetrieval = %+v, %v", got, err)
	}
	_, err = e.store.SetRetrieval(e.ctx, owner, k.KBID, json.RawMessage(`{"final_top_k":0}`))
	wantCode(t, err, failure.KindUnprocessable, "invalid_query_params")
	_, err = e.store.SetRetrieval(e.ctx, user("reader"), k.KBID, json.RawMessage(`{"final_top_k":8}`))
	wantErr(t, err, kb.ErrManage)

	updates := []string{`{"bm25_top_k":11}`, `{"rrf_k":12}`, `{"recall_top_k":13}`, `{"vector_weight":0.25}`, `{"search_mode":"keyword"}`}
	var wg sync.WaitGroup
	errs := make([]error, len(updates))
	for i, u := range updates {
		wg.Go(func() { _, errs[i] = e.store.SetRetrieval(e.ctx, owner, k.KBID, json.RawMessage(u)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := e.store.Get(e.ctx, owner, k.KBID)
	r := cur.Retrieval()
	if r.FinalTopK != 7 || r.BM25TopK != 11 || r.RRFK != 12 || r.RecallTopK != 13 || r.VectorWeight != 0.25 || r.SearchMode != "keyword" {
		t.Fatalf("after concurrent partial updates: %+v", r)
	}
}

func TestResolveChunking(t *testing.T) {
	t.Parallel()
	c, err := kb.ResolveChunking()
	if err != nil || c.PresetID != "general" || c.Config != chunk.DefaultConfig() {
		t.Fatalf("no layers = %+v, %v", c, err)
	}
	kbLayer := json.RawMessage(`{"chunk_preset_id":"qa","chunk_parser_config":{"chunk_token_num":256,"delimiter":"。"},"other":1}`)
	fileLayer := json.RawMessage(`{"chunk_preset_id":"book"}`)
	request := json.RawMessage(`{"chunk_parser_config":{"chunk_token_num":128,"delimiter":"\\n\\n"}}`)
	c, err = kb.ResolveChunking(kbLayer, fileLayer, request)
	if err != nil || c.PresetID != "book" || c.Config.ChunkTokenNum != 128 || c.Config.Delimiter != "\n\n" {
		t.Fatalf("KB < file < request = %+v, %v", c, err)
	}
	c, err = kb.ResolveChunking(kbLayer, nil, json.RawMessage("null"), json.RawMessage(`{}`))
	if err != nil || c.PresetID != "qa" || c.Config.ChunkTokenNum != 256 || c.Config.Delimiter != "。" {
		t.Fatalf("KB only = %+v, %v", c, err)
	}
	c, _ = kb.ResolveChunking(json.RawMessage(`{"chunk_preset_id":"no-such-preset"}`))
	if c.PresetID != "general" {
		t.Fatalf("unknown preset resolved to %q", c.PresetID)
	}
	for _, raw := range []string{`{"chunk_parser_config":{"chunk_token_num":5}}`, `{"chunk_parser_config":{"bogus":1}}`, `[1]`} {
		_, err := kb.ResolveChunking(kbLayer, json.RawMessage(raw))
		wantCode(t, err, failure.KindUnprocessable, "invalid_chunk_config")
	}
}

// TestAdditionalParams: chunk settings are validated and normalised when a
// KB is created, and merged key by key when it is updated.
func testAdditionalParams(t *testing.T, e *env) {
	k := e.createKB(t, kb.CreateInput{AdditionalParams: json.RawMessage(
		`{"chunk_preset_id":" QA ","chunk_parser_config":{"chunk_token_num":300,"delimiter":"\\t"},"note":"kept"}`)})
	var add map[string]any
	_ = json.Unmarshal(k.AdditionalParams, &add)
	cfg, _ := add["chunk_parser_config"].(map[string]any)
	if add["chunk_preset_id"] != "qa" || add["note"] != "kept" || cfg["chunk_token_num"] != float64(300) || cfg["delimiter"] != "\t" {
		t.Fatalf("stored additional_params = %s", k.AdditionalParams)
	}
	for raw, code := range map[string]string{
		`[1]`:                       "invalid_additional_params",
		`{"chunk_preset_id":3}`:     "invalid_additional_params",
		`{"chunk_parser_config":1}`: "invalid_chunk_config",
		`{"chunk_parser_config":{"chunk_token_num":1}}`: "invalid_chunk_config",
	} {
		_, err := e.store.Create(e.ctx, owner, kb.CreateInput{Name: "x" + raw, AdditionalParams: json.RawMessage(raw)})
		wantCode(t, err, failure.KindUnprocessable, code)
	}

	patch := json.RawMessage(`{"chunk_parser_config":{"chunk_token_num":64},"note":null,"extra":true}`)
	u, err := e.store.Update(e.ctx, owner, k.KBID, kb.UpdateInput{AdditionalParams: &patch})
	if err != nil {
		t.Fatal(err)
	}
	add = nil
	_ = json.Unmarshal(u.AdditionalParams, &add)
	cfg, _ = add["chunk_parser_config"].(map[string]any)
	if add["chunk_preset_id"] != "qa" || add["note"] != nil || add["extra"] != true || cfg["chunk_token_num"] != float64(64) {
		t.Fatalf("merged additional_params = %s", u.AdditionalParams)
	}
	c, err := kb.ResolveChunking(u.AdditionalParams)
	if err != nil || c.PresetID != "qa" || c.Config.ChunkTokenNum != 64 {
		t.Fatalf("chunking from the updated KB = %+v, %v", c, err)
	}
}

// TestRetrievalJSONNames pins the option names of the original's API.
func TestRetrievalJSONNames(t *testing.T) {
	t.Parallel()
	var names []string
	rt := reflect.TypeOf(kb.Retrieval{})
	for i := range rt.NumField() {
		names = append(names, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	want := []string{"search_mode", "final_top_k", "similarity_threshold", "bm25_top_k", "vector_weight", "bm25_weight",
		"fusion", "rrf_k", "use_reranker", "reranker_model", "recall_top_k", "include_distances",
		"use_graph_retrieval", "graph_entity_top_k", "graph_depth", "graph_max_nodes", "graph_top_k", "graph_weight", "ppr_damping"}
	if !slices.Equal(names, want) {
		t.Fatalf("json names = %v", names)
	}
	// "use_graph" is accepted as another name of use_graph_retrieval.
	r, err := kb.DefaultRetrieval().Overlay([]byte(`{"use_graph": true, "ppr_damping": 0.5}`))
	if err != nil || !r.UseGraph || r.PPRDamping != 0.5 {
		t.Fatalf("overlay use_graph = %+v, %v", r, err)
	}
	if _, err := kb.DefaultRetrieval().Overlay([]byte(`{"ppr_damping": 1}`)); err == nil {
		t.Fatal("ppr_damping 1 accepted")
	}
}
