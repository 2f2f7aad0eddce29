package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// itemResult is one evaluated item, as stored.
type itemResult struct {
	item    Item
	answer  *string
	metrics map[string]any
	// The JSON of gold ids, retrieved chunks and metrics, encoded by the
	// item's worker so that the batch's commit only writes.
	goldJSON, retrievedJSON, metricsJSON []byte
}

// EvaluateBatch evaluates batch batch of run runID and commits it: the
// items' results, the run's progress and either the next batch's event or,
// after the last batch, the run's metrics and status. It is a no-op when the
// run is gone, no longer running, or past this batch (a redelivery). Errors
// are transient (the event is redelivered and the batch redone) unless
// marked by failure: a failure.Error ends the run as failed.
//
// A RAG run's delivery then goes on with the following batches itself (a
// chain, at most Config.ChainFor), evaluating their items with the same
// bounded concurrency without a pause at batch boundaries while earlier
// batches commit. Each batch still commits on its own with the next batch's
// event, which the chain keeps from the relay and settles in the next
// batch's commit: a crash resumes at the last committed batch, when the
// sweep publishes the kept event.
func (s *Service) EvaluateBatch(ctx context.Context, runID string, batch int) error {
	if IsSuiteRun(runID) {
		return s.evaluateSuiteBatch(ctx, runID, batch)
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM evaluation_runs WHERE run_id = $1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.Status != "running" || r.nextBatch != batch {
		return nil
	}
	if stopped, err := s.stopRunIfCancelled(ctx, runID, batch); stopped || err != nil {
		return err
	}
	env, err := s.runEnv(ctx, r)
	if _, coded := failure.As(err); coded {
		return s.failRun(ctx, r, err)
	}
	if err != nil {
		return err
	}
	return s.chain(ctx, r, env, batch)
}

// runEnv is what every batch of a run reads: the dataset, the KB and the
// answer and judge models, loaded once per delivery.
type runEnv struct {
	d             Dataset
	k             kb.KB
	answer, judge llm.ChatModel
}

func (s *Service) runEnv(ctx context.Context, r Run) (runEnv, error) {
	var e runEnv
	var err error
	if e.d, err = s.dataset(ctx, nil, r.DatasetID, r.KBID); err != nil {
		return e, err
	}
	if e.k, err = s.kbs.LoadSettings(ctx, r.KBID); err != nil {
		return e, err
	}
	if r.cfg.AnswerLLM != "" {
		if e.answer, _, err = s.models.ChatModel(r.cfg.AnswerLLM); err != nil {
			return e, failure.Unprocessable("invalid_answer_llm", "answer_llm %s: %v", r.cfg.AnswerLLM, err)
		}
	}
	if spec := r.cfg.judgeSpec(); spec != "" && e.d.HasGoldAnswers {
		if e.judge, _, err = s.models.ChatModel(spec); err != nil {
			return e, failure.Unprocessable("invalid_judge_llm", "judge model %s: %v", spec, err)
		}
	}
	return e, nil
}

// chainBatchMax ends a chain after a batch this slow: the next batch's
// event, kept from the relay, must be settled well within the outbox claim
// (30s by default), or the sweep delivers it while the chain still works on
// that batch.
const chainBatchMax = 5 * time.Second

// inFlight is a batch of a chain whose items are being evaluated.
type inFlight struct {
	batch   int
	items   []Item
	out     []itemResult
	errs    []error
	err     error         // its items could not be read
	spawned chan struct{} // closed when every item started (or the chain stopped)
	wg      sync.WaitGroup
}

// chain evaluates batches first, first+1, … of r and commits each in
// order. A feeder starts the items of the batches in order, Concurrency at
// once across batch boundaries, at most one batch ahead of the commits.
func (s *Service) chain(ctx context.Context, r Run, env runEnv, first int) error {
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup // the feeder and the items
	defer func() { cancel(); running.Wait() }()
	start := time.Now()
	sem := make(chan struct{}, s.atOnce(r.cfg, env))
	next := make(chan *inFlight, 1)
	running.Add(1)
	go func() {
		defer running.Done()
		defer close(next)
		for b := first; b*r.batchSize < r.TotalItems && (b == first || time.Since(start) < s.cfg.ChainFor); b++ {
			f := &inFlight{batch: b, spawned: make(chan struct{})}
			f.items, f.err = s.items(ctx, r.DatasetID, b*r.batchSize, r.batchSize)
			f.out, f.errs = make([]itemResult, len(f.items)), make([]error, len(f.items))
			select {
			case next <- f:
			case <-ctx.Done():
				return
			}
			if f.err != nil {
				close(f.spawned)
				return
			}
			for _, g := range s.groups(len(f.items), r.cfg, env) {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					for j := g[0]; j < len(f.items); j++ {
						f.errs[j] = ctx.Err()
					}
					close(f.spawned)
					return
				}
				f.wg.Add(1)
				running.Add(1)
				go func() {
					defer func() { <-sem; f.wg.Done(); running.Done() }()
					s.evaluateItems(ctx, env, r.cfg, f.items[g[0]:g[1]], f.out[g[0]:g[1]], f.errs[g[0]:g[1]])
				}()
			}
			close(f.spawned)
		}
	}()

	// kept is the event of the batch in hand when the chain carries it on:
	// handed back to the relay when the chain stops short of committing it.
	var kept []outbox.Row
	release := func() { s.ob.Publish(context.WithoutCancel(ctx), kept) }
	// stop ends the chain on a transient error: the delivery's own batch is
	// retried by its delivery; a chained one by the kept event's.
	stop := func(batch int, err error) error {
		if batch == first {
			return err
		}
		s.log.Warn("evaluation chain stopped: the relay redelivers the batch", "run", r.RunID, "batch", batch, "error", err)
		release()
		return nil
	}
	batchStart := start
	f, ok := <-next
	for ok {
		err := f.err
		if err == nil {
			<-f.spawned
			f.wg.Wait()
			err = errors.Join(f.errs...)
		}
		if _, coded := failure.As(err); coded {
			release() // a no-op delivery once the run failed
			return s.failRun(ctx, r, err)
		}
		if err != nil {
			return stop(f.batch, err)
		}
		s.crash("evaluate.batch_evaluated")
		var nf *inFlight
		keep := false
		if (f.batch+1)*r.batchSize < r.TotalItems && time.Since(start) < s.cfg.ChainFor && time.Since(batchStart) < chainBatchMax {
			if nf, keep = <-next; keep && nf.err != nil {
				keep = false
			}
		}
		rows, committed, err := s.commitBatch(ctx, r, f, kept, keep)
		if err != nil {
			return stop(f.batch, err)
		}
		s.crash("evaluate.batch_committed")
		if !committed {
			release() // raced by another delivery, or the run ended
			return nil
		}
		if !keep || len(rows) == 0 { // done, or cancelled in this commit
			return nil
		}
		kept, f, batchStart = rows, nf, time.Now()
	}
	release()
	return ctx.Err()
}

// commitBatch commits f's results, r's progress and the next batch's event
// (or r's completion), settling settle (the event of f kept by the chain).
// With keep, the rows written are returned instead of published: the chain
// goes on with the next batch itself. committed is false when the batch
// was raced by another delivery or the run ended. A cancel requested
// (cancel.go) ends the run as cancelled in this commit instead of emitting
// the next batch: no rows are returned then.
func (s *Service) commitBatch(ctx context.Context, r Run, f *inFlight, settle []outbox.Row, keep bool) ([]outbox.Row, bool, error) {
	committed := false
	rows, err := s.ob.TxRows(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		// The row lock taken here orders this commit with a cancel (cancel.go).
		var cancelled bool
		err := tx.QueryRow(ctx, `UPDATE evaluation_runs SET next_batch = $3, completed_items = completed_items + $4
			WHERE run_id = $1 AND next_batch = $2 AND status = 'running' RETURNING cancel_requested_at IS NOT NULL`,
			r.RunID, f.batch, f.batch+1, len(f.out)).Scan(&cancelled)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		committed = true
		// One round trip for the batch's rows (one statement) and the kept
		// event's settlement.
		var b pgx.Batch
		queueItems(&b, r.RunID, f.out)
		outbox.QueueSettle(&b, settle)
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if (f.batch+1)*r.batchSize < r.TotalItems {
			if cancelled {
				return cancelRunTx(ctx, tx, r.RunID)
			}
			return emit(batchEvent(r.RunID, f.batch+1))
		}
		return s.completeTx(ctx, tx, emit, r)
	})
	if err != nil {
		return nil, false, err
	}
	if !keep {
		s.ob.Publish(ctx, rows)
		rows = nil
	}
	return rows, committed, nil
}

// queueItems queues the insert of a batch's item rows as one statement:
// one row per element of its arrays (the JSON columns as text, cast by the
// server).
func queueItems(b *pgx.Batch, runID string, out []itemResult) {
	n := len(out)
	idx := make([]int32, n)
	ids, queries := make([]string, n), make([]string, n)
	gold, retrieved, metrics := make([]string, n), make([]string, n), make([]string, n)
	goldAnswers, answers := make([]*string, n), make([]*string, n)
	for i, res := range out {
		idx[i], ids[i], queries[i] = int32(res.item.ItemIndex), res.item.ItemID, res.item.Query
		gold[i], retrieved[i], metrics[i] = string(res.goldJSON), string(res.retrievedJSON), string(res.metricsJSON)
		goldAnswers[i], answers[i] = res.item.GoldAnswer, res.answer
	}
	b.Queue(`INSERT INTO evaluation_run_items (run_id, item_index, dataset_item_id, query_text, gold_chunk_ids,
		gold_answer, generated_answer, retrieved_chunks, metrics)
		SELECT $1::text, i, d, q, g::jsonb, ga, a, rc::jsonb, m::jsonb
		FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[]) AS u(i, d, q, g, ga, a, rc, m)
		ON CONFLICT (run_id, item_index) DO NOTHING`,
		runID, idx, ids, queries, gold, goldAnswers, answers, retrieved, metrics)
}

// failRun ends a run as failed with metrics {error}, as the original.
func (s *Service) failRun(ctx context.Context, r Run, cause error) error {
	msg, _ := json.Marshal(map[string]string{"error": cause.Error()})
	_, err := s.pool.Exec(ctx, `UPDATE evaluation_runs SET status = 'failed', metrics = $2, completed_at = now()
		WHERE run_id = $1 AND status = 'running'`, r.RunID, msg)
	return err
}

// completeTx aggregates the run's item metrics (in item order, so that a
// resumed run computes exactly what an uninterrupted one does) and ends it.
func (s *Service) completeTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, r Run) error {
	rows, err := tx.Query(ctx, `SELECT metrics FROM evaluation_run_items WHERE run_id = $1 ORDER BY item_index`, r.RunID)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[map[string]any])
	if err != nil {
		return err
	}
	var retrieval []map[string]float64
	var answers []float64
	for _, m := range all {
		if _, ok := m["recall@10"]; ok {
			ret := map[string]float64{}
			for k, v := range m {
				if f, ok := v.(float64); ok && k != "score" {
					ret[k] = f
				}
			}
			retrieval = append(retrieval, ret)
		}
		if f, ok := m["score"].(float64); ok {
			answers = append(answers, f)
		}
	}
	metrics, overall := Aggregate(retrieval, answers)
	met, _ := json.Marshal(metrics)
	if _, err := tx.Exec(ctx, `UPDATE evaluation_runs SET status = 'completed', metrics = $2, overall_score = $3, completed_at = now()
		WHERE run_id = $1`, r.RunID, met, overall); err != nil {
		return err
	}
	return s.gateTx(ctx, tx, emit, r, metrics, overall)
}

// groups splits a batch of n items into the units evaluated at once, as
// [from, to) ranges. A run whose items are only CPU and database work —
// keyword retrieval (no embedder, reranker or graph) and no answer or judge
// model — is retrieved in groups of about equal size, each group's queries
// together (one keyword index read and one chunk load per group): as many
// groups as Concurrency, but no more than the cores (GOMAXPROCS), and as
// many at once (atOnce), since more CPU-bound units at once than cores
// only contend (figure 18: on 2 cores 300 items took 311 ms at 2 at once,
// 363 ms at 4). Any other run
// evaluates its items one each, Concurrency at once: they wait on their
// models.
func (s *Service) groups(n int, cfg RunConfig, env runEnv) [][2]int {
	units := n
	if s.grouped(cfg, env) {
		units = min(n, s.atOnce(cfg, env))
	}
	out := make([][2]int, 0, units)
	for i, from := 0, 0; i < units; i++ {
		size := n / units // units groups of size or size+1, the larger first
		if i < n%units {
			size++
		}
		out = append(out, [2]int{from, from + size})
		from += size
	}
	return out
}

// grouped tells whether a run's batches are retrieved in groups.
func (s *Service) grouped(cfg RunConfig, env runEnv) bool {
	_, many := s.ret.(ManyRetriever)
	return many && cpuBound(cfg, env)
}

// atOnce is how many units of a run are evaluated at once, across batch
// boundaries: Concurrency, and for a grouped run no more than the cores.
func (s *Service) atOnce(cfg RunConfig, env runEnv) int {
	if s.grouped(cfg, env) {
		return min(s.cfg.Concurrency, max(runtime.GOMAXPROCS(0), 1))
	}
	return s.cfg.Concurrency
}

// cpuBound tells whether a run's items wait on nothing but the local KB:
// keyword retrieval without reranker or graph, no answer or judge model.
func cpuBound(cfg RunConfig, env runEnv) bool {
	return cfg.SearchMode == "keyword" && !cfg.UseReranker && !cfg.UseGraph && env.answer == nil && env.judge == nil
}

// ManyRetriever is a Retriever that answers several queries at once, each
// as Query would (kb.Retriever.QueryMany).
type ManyRetriever interface {
	QueryMany(ctx context.Context, k kb.KB, queries []string, opt kb.Retrieval) ([][]kb.Result, []error)
}

// evaluateItems evaluates items into out and errs (same length): their
// queries retrieved together when there are several and the retriever
// can, then each item scored.
func (s *Service) evaluateItems(ctx context.Context, env runEnv, cfg RunConfig, items []Item, out []itemResult, errs []error) {
	res := make([][]kb.Result, len(items))
	qerrs := make([]error, len(items))
	if many, ok := s.ret.(ManyRetriever); ok && len(items) > 1 {
		queries := make([]string, len(items))
		for i, it := range items {
			queries[i] = it.Query
		}
		res, qerrs = many.QueryMany(ctx, env.k, queries, cfg.Retrieval)
	} else {
		for i, it := range items {
			res[i], qerrs[i] = s.ret.Query(ctx, env.k, it.Query, cfg.Retrieval, "")
		}
	}
	for i, it := range items {
		out[i], errs[i] = s.evaluateItem(ctx, env.d, it, res[i], qerrs[i], env.answer, env.judge)
	}
}

// evaluateItem scores one item given its query's retrieval (res, err).
func (s *Service) evaluateItem(ctx context.Context, d Dataset, it Item, res []kb.Result, err error, answerModel, judgeModel llm.ChatModel) (itemResult, error) {
	if fe, ok := failure.As(err); ok && (fe.Code == "empty_query" || fe.Code == "query_too_long") {
		// The item's own query cannot be searched: it scores 0, the run goes on.
		res, err = nil, nil
	}
	if err != nil {
		return itemResult{}, fmt.Errorf("item %d: %w", it.ItemIndex, err)
	}
	if res == nil {
		res = []kb.Result{}
	}
	ids := make([]string, len(res))
	docs := make([]string, len(res))
	contents := make([]string, len(res))
	for i, c := range res {
		ids[i], docs[i], contents[i] = c.ID, c.FileID, c.Content
	}
	out := itemResult{item: it, metrics: map[string]any{}}
	if d.HasGoldChunks && len(it.GoldChunkIDs) > 0 {
		for k, v := range RetrievalScores(ids, docs, it.GoldChunkIDs) {
			out.metrics[k] = v
		}
	}
	if answerModel != nil {
		a, err := generateAnswer(ctx, answerModel, it.Query, contents)
		if err != nil {
			a = "" // judged as no answer, as the original's swallowed error
			s.log.Warn("evaluation answer", "query", it.Query, "error", err)
		}
		out.answer = &a
	}
	if judgeModel != nil && it.GoldAnswer != nil && *it.GoldAnswer != "" {
		answer := ""
		if out.answer != nil {
			answer = *out.answer
		}
		j := judge(ctx, judgeModel, it.Query, *it.GoldAnswer, answer)
		out.metrics["score"] = j.Score
		out.metrics["reasoning"] = j.Reasoning
	}
	out.goldJSON, _ = json.Marshal(it.GoldChunkIDs)
	out.retrievedJSON, _ = json.Marshal(res)
	out.metricsJSON, _ = json.Marshal(out.metrics)
	return out, nil
}
