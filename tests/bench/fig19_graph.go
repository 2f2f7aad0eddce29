package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/graph"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/vector"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 19: the knowledge graph — graph build throughput with an instant
// extractor against a bulk COPY of the same rows, and graph-augmented query
// latency against hybrid query latency on the 100k-chunk KB of figure 6.
const (
	graphBuildChunks  = 5000
	graphBuildConc    = 4
	graphBuildTarget  = 0.5 // chunks/s ≥ 0.5× COPY of the same rows
	graphEntities     = 50_000
	graphQueryTarget  = 2.0 // graph-augmented p99 ≤ 2× hybrid p99
	graphEntsPerChunk = 5
)

// instantExtractor answers an extraction at once: the chunk's words of 8+
// letters (at most 5) as entities, chained by relations.
type instantExtractor struct{}

func (instantExtractor) Stream(_ context.Context, req llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	text := req.Messages[len(req.Messages)-1].Content
	if i := strings.Index(text, "Text:\n"); i >= 0 {
		text = text[i+len("Text:\n"):]
	}
	b, _ := json.Marshal(annotate(text, nil))
	return llm.Response{Content: string(b)}, nil
}

// annotate is the bench's deterministic entity annotator: up to 5 distinct
// words of 8+ letters (lower-cased), admitted only while allow says so (nil:
// all), linked in order.
func annotate(text string, allow func(string) bool) graph.Extracted {
	var x graph.Extracted
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(w) < 8 || seen[w] || (allow != nil && !allow(w)) {
			continue
		}
		seen[w] = true
		x.Entities = append(x.Entities, graph.ExtractedEntity{Name: w, Type: "Term"})
		if n := len(x.Entities); n > 1 {
			x.Relations = append(x.Relations, graph.ExtractedRelation{Source: x.Entities[n-2].Name, Target: w, Type: "near"})
		}
		if len(x.Entities) == graphEntsPerChunk {
			break
		}
	}
	return x
}

func figGraph(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[19] knowledge graph: build throughput and graph-augmented query latency",
		"build: graph.Extractor.ExtractFile over synthetic chunks (SciFact sentences) with an instant in-process extractor "+
			"(words of 8+ letters as entities, chained), concurrency 4, vs one COPY per table of the same rows; query: "+
			"kb.Retriever.Query hybrid with use_graph_retrieval vs hybrid, SciFact's test queries, on figure 6's 100k-chunk KB "+
			"whose graph is written from the same annotator, capped at 50k entities")
	kn, err := e.knowledge(ctx)
	if err != nil {
		return err
	}
	sci, err := kn.dataKB(ctx, e, "scifact")
	if err != nil {
		return err
	}
	var sentences []string
	for _, d := range sci.ds.Corpus {
		sentences = append(sentences, splitSentences(d.Text)...)
	}
	if err := graphBuild(ctx, e, kn, sentences, r); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	return graphQuery(ctx, e, kn, sci, r)
}

func graphBuild(ctx context.Context, e *env, kn *knowledge, sentences []string, r *benchkit.Report) error {
	pool := kn.app.Pool
	chunks := make([]graph.ChunkText, graphBuildChunks)
	for i := range chunks {
		chunks[i] = graph.ChunkText{ID: fmt.Sprintf("gb_chunk_%05d", i),
			Content: sentences[(i*7)%len(sentences)] + " " + sentences[(i*13+1)%len(sentences)]}
	}
	e.Progress("figure 19: graph build of %d chunks", len(chunks))
	x := graph.NewExtractor(pool, kn.app.Knowledge.Graph)
	t0 := time.Now()
	if _, err := x.ExtractFile(ctx, "bench-graph-build", "file_bench", chunks, graph.Schema{}, instantExtractor{}, "instant", graphBuildConc); err != nil {
		return err
	}
	build := time.Since(t0)

	// The floor: the same rows, one COPY per table, one transaction.
	var ents, rels, ems, rms, exs [][]any
	seenE, seenR := map[string]bool{}, map[string]bool{}
	for _, c := range chunks {
		g := graph.Build(c.ID, "file_bench", annotate(c.Content, nil))
		for _, en := range g.Entities {
			if !seenE[en.ID] {
				seenE[en.ID] = true
				ents = append(ents, []any{"bench-graph-copy", en.ID, en.Name, en.Label, en.Description})
			}
			ems = append(ems, []any{"bench-graph-copy", c.ID, en.ID, "file_bench"})
		}
		for _, rl := range g.Relations {
			if !seenR[rl.ID] {
				seenR[rl.ID] = true
				rels = append(rels, []any{"bench-graph-copy", rl.ID, rl.Source, rl.Target, rl.Type, rl.Description})
			}
			rms = append(rms, []any{"bench-graph-copy", c.ID, rl.ID, "file_bench"})
		}
		exs = append(exs, []any{"bench-graph-copy", c.ID, "file_bench", "done"})
	}
	t0 = time.Now()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after commit: no-op
	for _, t := range []struct {
		name string
		cols []string
		rows [][]any
	}{
		{"graph_entities", []string{"kb_id", "entity_id", "name", "label", "description"}, ents},
		{"graph_relations", []string{"kb_id", "relation_id", "source_id", "target_id", "type", "description"}, rels},
		{"graph_entity_mentions", []string{"kb_id", "chunk_id", "entity_id", "file_id"}, ems},
		{"graph_relation_mentions", []string{"kb_id", "chunk_id", "relation_id", "file_id"}, rms},
		{"graph_chunk_extractions", []string{"kb_id", "chunk_id", "file_id", "status"}, exs},
	} {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
			return fmt.Errorf("copy %s: %w", t.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	floor := time.Since(t0)
	rate, floorRate := float64(len(chunks))/build.Seconds(), float64(len(chunks))/floor.Seconds()
	ratio := benchkit.Ratio(rate, floorRate)
	r.Line("graph_build_chunks_per_s", fmt.Sprintf("%.0f/s", rate), benchkit.X(ratio)+fmt.Sprintf(" vs COPY %.0f/s", floorRate),
		fmt.Sprintf("≥ %.1f×", graphBuildTarget), ratio >= graphBuildTarget)
	r.Detail("build: %d chunks in %s (%d entities, %d relations, %d mentions); COPY of the same rows %s",
		len(chunks), build.Round(time.Millisecond), len(ents), len(rels), len(ems)+len(rms), floor.Round(time.Millisecond))
	for _, kb := range []string{"bench-graph-build", "bench-graph-copy"} {
		if err := kn.app.Knowledge.Graph.DeleteKB(ctx, kb); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, `DELETE FROM graph_chunk_extractions WHERE kb_id = $1`, kb); err != nil {
			return err
		}
	}
	return nil
}

func graphQuery(ctx context.Context, e *env, kn *knowledge, sci *corpusKB, r *benchkit.Report) error {
	big, err := kn.synthetic(ctx, e, sci.ds, queryBigChunks)
	if err != nil {
		return err
	}
	// As figure 6: nothing is timed while the HNSW graph is being built.
	if _, err := kn.query(ctx, big.kb, "vector", "warm up"); err != nil {
		return err
	}
	if pg, ok := kn.app.Knowledge.Vectors.(*vector.Postgres); ok {
		e.Progress("figure 19: waiting for the HNSW graph of the 100k KB")
		if _, _, err := waitGraph(ctx, pg, big.kb.KBID); err != nil {
			return err
		}
	}
	// Its graph: words of 8+ letters, frequent ones (in more than 1% of
	// chunks: hubs no extractor would name) left out, at most 50k entities.
	e.Progress("figure 19: writing the graph of the 100k KB")
	rows, err := kn.app.Pool.Query(ctx, `SELECT chunk_id, file_id, content FROM knowledge_chunks WHERE kb_id = $1 ORDER BY chunk_id`, big.kb.KBID)
	if err != nil {
		return err
	}
	type ch struct{ id, file, content string }
	var all []ch
	for rows.Next() {
		var c ch
		if err := rows.Scan(&c.id, &c.file, &c.content); err != nil {
			rows.Close()
			return err
		}
		all = append(all, c)
	}
	rows.Close()
	df := map[string]int{}
	for _, c := range all {
		for w := range map[string]bool(wordsOf(c.content)) {
			df[w]++
		}
	}
	admitted := map[string]bool{}
	var mu sync.Mutex
	allow := func(w string) bool {
		mu.Lock()
		defer mu.Unlock()
		if admitted[w] {
			return true
		}
		if df[w]*100 > len(all) || len(admitted) >= graphEntities {
			return false
		}
		admitted[w] = true
		return true
	}
	t0 := time.Now()
	var batch []graph.ChunkGraph
	for i, c := range all {
		batch = append(batch, graph.Build(c.id, c.file, annotate(c.content, allow)))
		if len(batch) == 2000 || i == len(all)-1 {
			if err := kn.app.Knowledge.Graph.WriteChunks(ctx, big.kb.KBID, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	st, err := kn.app.Knowledge.Graph.Stats(ctx, big.kb.KBID)
	if err != nil {
		return err
	}
	r.Detail("100k KB graph: %d entities, %d relations over %d chunks, written in batches of 2,000 chunks in %s",
		st.Entities, st.Relations, st.Chunks, time.Since(t0).Round(time.Millisecond))
	// What a build does when it has written (Builder.BuildFile): settle the
	// graph (the embedded engine: VACUUM (ANALYZE) of its tables).
	t0 = time.Now()
	if err := graph.Settle(ctx, kn.app.Knowledge.Graph); err != nil {
		return err
	}
	r.Detail("settling the written graph as a build does (graph.Settle): %s", time.Since(t0).Round(time.Millisecond))

	queries := make([]string, len(sci.ds.Queries))
	for i, q := range sci.ds.Queries {
		queries[i] = q.Text
	}
	base := big.kb.Retrieval()
	base.SearchMode = "hybrid"
	withGraph := base
	withGraph.UseGraph = true
	for _, q := range queries[:10] { // warm both paths
		if _, err := kn.app.Knowledge.Retriever.Query(ctx, big.kb, q, withGraph, ""); err != nil {
			return err
		}
	}
	e.Progress("figure 19: %d queries, hybrid and hybrid+graph in turn", len(queries))
	var hyb, gra benchkit.Samples
	graphFound := 0
	for _, q := range queries {
		t0 := time.Now()
		if _, err := kn.app.Knowledge.Retriever.Query(ctx, big.kb, q, base, ""); err != nil {
			return err
		}
		hyb = append(hyb, time.Since(t0))
		t0 = time.Now()
		res, err := kn.app.Knowledge.Retriever.Query(ctx, big.kb, q, withGraph, "")
		if err != nil {
			return err
		}
		gra = append(gra, time.Since(t0))
		for _, x := range res {
			if x.GraphScore != nil {
				graphFound++
				break
			}
		}
	}
	ratio := benchkit.DurRatio(gra.P99(), hyb.P99())
	r.Line("graph_query_100k_p99", benchkit.Ms(gra.P99()), benchkit.X(ratio)+" vs hybrid p99 "+benchkit.Ms(hyb.P99()),
		fmt.Sprintf("≤ %.0f×", graphQueryTarget), ratio <= graphQueryTarget)
	r.Detail("hybrid p50 %s, hybrid+graph p50 %s; %d of %d graph-augmented queries had a graph-ranked chunk in the results",
		benchkit.Ms(hyb.P50()), benchkit.Ms(gra.P50()), graphFound, len(queries))
	return nil
}

func wordsOf(text string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(w) >= 8 {
			out[w] = true
		}
	}
	return out
}
