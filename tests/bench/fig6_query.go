package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/vector"
	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// Figure 6: query latency of kb.Retriever.Query in process, per search
// mode, at 5k and 100k chunks, against a SELECT 1 round trip.
const (
	query5kTarget   = 20 * time.Millisecond
	query100kTarget = 100 * time.Millisecond
	queryBigChunks  = 100_000
	queryPasses     = 2 // passes over the test queries, each query in every mode
	graphWait       = 4 * time.Minute
)

// queryModes are the KB's search modes, with the KB's other defaults.
var queryModes = []string{"keyword", "vector", "hybrid"}

func figQuery(ctx context.Context, e *env, r *benchkit.Report) error {
	r.Section("[6] query latency: kb.Retriever.Query in process, per search mode, at 5k and 100k chunks",
		"the KB's default retrieval options (final_top_k 10, hybrid weighted 0.7/0.3) with the search mode set; queries: SciFact's "+
			"300 test queries, "+fmt.Sprint(queryPasses)+" passes, every query in each mode in turn, each preceded by the floor: SELECT 1 on the "+
			"same pool (the fixture App's); caches warm (loaded by earlier queries; at 100k the HNSW graph built in the background "+
			"is waited for); cold: the first query of a freshly opened App (a new process's caches: keyword postings and vectors "+
			"loaded from PostgreSQL), one per mode; 5k: the SciFact KB of figure 5; 100k: SciFact sentences shuffled two or three to a "+
			"chunk (separator preset), ingested through kb-index's handler")
	kn, err := e.knowledge(ctx)
	if err != nil {
		return err
	}
	sci, err := kn.dataKB(ctx, e, "scifact")
	if err != nil {
		return err
	}
	big, err := kn.synthetic(ctx, e, sci.ds, queryBigChunks)
	if err != nil {
		return err
	}
	r.Detail("100k KB: %d files, %d chunks, ingested in %s (%.0f chunks/s through kb-index's handler, embedding batches of 1024, 2 files at once)",
		big.files, big.chunks, big.took.Round(time.Millisecond), float64(big.chunks)/big.took.Seconds())
	// Nothing is timed while a graph is being built: the first vector search
	// of the 100k KB starts the build (figure 5 may have started it already).
	if _, err := kn.query(ctx, big.kb, "vector", "warm up"); err != nil {
		return err
	}
	graph := "exact search"
	if pg, ok := kn.app.Knowledge.Vectors.(*vector.Postgres); ok {
		e.Progress("figure 6: waiting for the HNSW graph of the 100k KB")
		info, waited, err := waitGraph(ctx, pg, big.kb.KBID)
		if err != nil {
			return err
		}
		if info.Indexed {
			graph = fmt.Sprintf("HNSW graph over %d vectors (waited %s for the end of its build); usable %v, ef for k=10: %d",
				info.Vectors, waited.Round(time.Millisecond), info.IndexUsable, info.IndexEf)
			if !info.IndexUsable {
				graph += ", so search stays exact"
			}
		}
	}
	queries := make([]string, len(sci.ds.Queries))
	for i, q := range sci.ds.Queries {
		queries[i] = q.Text
	}
	for _, size := range []struct {
		name   string
		c      *corpusKB
		target time.Duration
		graph  string
	}{{"5k", sci, query5kTarget, "exact search (below the HNSW threshold)"}, {"100k", big, query100kTarget, graph}} {
		if err := kn.timeQueries(ctx, e, r, size.name, size.c, queries, size.target); err != nil {
			return fmt.Errorf("%s: %w", size.name, err)
		}
		r.Detail("%s: %d chunks in %d files; vectors: %s", size.name, size.c.chunks, size.c.files, size.graph)
	}
	return nil
}

// timeQueries measures cold and warm latency on one KB and reports it.
func (kn *knowledge) timeQueries(ctx context.Context, e *env, r *benchkit.Report, size string, c *corpusKB, queries []string, target time.Duration) error {
	e.Progress("figure 6: %s chunks: cold queries", size)
	cold := map[string]time.Duration{}
	for _, mode := range queryModes {
		d, err := kn.coldQuery(ctx, e, c.kb, mode, queries[0])
		if err != nil {
			return err
		}
		cold[mode] = d
	}
	for _, mode := range queryModes { // the fixture's caches were loaded by earlier queries; make sure
		if _, err := kn.query(ctx, c.kb, mode, queries[0]); err != nil {
			return err
		}
	}
	e.Progress("figure 6: %s chunks: %d passes of %d queries × %d modes", size, queryPasses, len(queries), len(queryModes))
	floor, lat, err := kn.warmQueries(ctx, c.kb, queries)
	if err != nil {
		return err
	}
	f50, f99 := floor.P50(), floor.P99()
	r.Line("query_"+size+"_floor_select1_p99", benchkit.Ms(f99), fmt.Sprintf("the floor: SELECT 1 round trip, p50 %s", benchkit.Ms(f50)), "", false)
	for _, mode := range queryModes {
		s := lat[mode]
		p99 := s.P99()
		r.Line(fmt.Sprintf("query_%s_%s_p99", size, mode), benchkit.Ms(p99), benchkit.X(benchkit.DurRatio(p99, f99))+" vs floor "+benchkit.Ms(f99),
			"≤ "+benchkit.Ms(target), p99 <= target)
		r.Detail("%s %s: p50 %s (%s floor p50), max %s over %d queries; cold (first query of a new process) %s",
			size, mode, benchkit.Ms(s.P50()), benchkit.X(benchkit.DurRatio(s.P50(), f50)), benchkit.Ms(s.Pct(100)), len(s), benchkit.Ms(cold[mode]))
	}
	return nil
}

// query runs one query in mode with the KB's other retrieval defaults.
func (kn *knowledge) query(ctx context.Context, k kb.KB, mode, q string) ([]kb.Result, error) {
	return queryOn(ctx, kn.app, k, mode, q)
}

func queryOn(ctx context.Context, app *benchApp, k kb.KB, mode, q string) ([]kb.Result, error) {
	opt := k.Retrieval()
	opt.SearchMode = mode
	res, err := app.Knowledge.Retriever.Query(ctx, k, q, opt, "")
	if err == nil && len(res) == 0 {
		err = fmt.Errorf("%s query %q found nothing", mode, q)
	}
	return res, err
}

// coldQuery opens a new App on the fixture's database (a new process: empty
// caches), times its first query in mode and closes it.
func (kn *knowledge) coldQuery(ctx context.Context, e *env, k kb.KB, mode, q string) (time.Duration, error) {
	app, err := e.openKnowledgeApp(ctx, kn.db, kn.prefix, kn.blobDir)
	if err != nil {
		return 0, err
	}
	defer app.Close()
	if err := app.Pool.Ping(ctx); err != nil { // the pool's first connection is not the query's cost
		return 0, err
	}
	t0 := time.Now()
	if _, err := queryOn(ctx, app, k, mode, q); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// waitGraph waits until the HNSW graph build of the collection, if a search
// started one, has ended, polling the store's cache state.
func waitGraph(ctx context.Context, pg *vector.Postgres, kbID string) (vector.CacheInfo, time.Duration, error) {
	t0 := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		info := pg.CacheInfo(kbID)
		if !info.Building { // a due build was started by the search before it returned

			return info, time.Since(t0), nil
		}
		if time.Since(t0) > graphWait {
			return info, time.Since(t0), fmt.Errorf("HNSW graph of %s not built after %s", kbID, graphWait)
		}
		select {
		case <-ctx.Done():
			return info, time.Since(t0), ctx.Err()
		case <-tick.C:
		}
	}
}

// warmQueries runs every query in every mode queryPasses times, each
// preceded by a SELECT 1 on the same pool.
func (kn *knowledge) warmQueries(ctx context.Context, k kb.KB, queries []string) (benchkit.Samples, map[string]benchkit.Samples, error) {
	var floor benchkit.Samples
	lat := map[string]benchkit.Samples{}
	for range queryPasses {
		for _, q := range queries {
			for _, mode := range queryModes {
				d, err := selectOne(ctx, kn.app.Pool)
				if err != nil {
					return nil, nil, err
				}
				floor = append(floor, d)
				t0 := time.Now()
				if _, err := kn.query(ctx, k, mode, q); err != nil {
					return nil, nil, err
				}
				lat[mode] = append(lat[mode], time.Since(t0))
			}
		}
	}
	return floor, lat, nil
}

func selectOne(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var one int
	t0 := time.Now()
	err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one)
	return time.Since(t0), err
}
