package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// itemResult is one evaluated item, as stored.
type itemResult struct {
	item      Item
	answer    *string
	retrieved []kb.Result
	metrics   map[string]any
}

// EvaluateBatch evaluates batch batch of run runID and commits it: the
// items' results, the run's progress and either the next batch's event or,
// after the last batch, the run's metrics and status. It is a no-op when the
// run is gone, no longer running, or past this batch (a redelivery). Errors
// are transient (the event is redelivered and the batch redone) unless
// marked by failure: a failure.Error ends the run as failed.
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
	results, err := s.evaluateItems(ctx, r, batch)
	if _, coded := failure.As(err); coded {
		return s.failRun(ctx, r, err)
	}
	if err != nil {
		return err
	}
	s.crash("evaluate.batch_evaluated")
	err = s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		// The row lock taken here orders this commit with a cancel (cancel.go).
		var cancelled bool
		err := tx.QueryRow(ctx, `UPDATE evaluation_runs SET next_batch = $3, completed_items = completed_items + $4
			WHERE run_id = $1 AND next_batch = $2 AND status = 'running' RETURNING cancel_requested_at IS NOT NULL`,
			runID, batch, batch+1, len(results)).Scan(&cancelled)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // raced by another delivery of this batch, or the run ended
		}
		if err != nil {
			return err
		}
		// One round trip for the batch's rows.
		var b pgx.Batch
		for _, res := range results {
			gold, _ := json.Marshal(res.item.GoldChunkIDs)
			ret, _ := json.Marshal(res.retrieved)
			met, _ := json.Marshal(res.metrics)
			b.Queue(`INSERT INTO evaluation_run_items (run_id, item_index, dataset_item_id, query_text, gold_chunk_ids,
				gold_answer, generated_answer, retrieved_chunks, metrics) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)
				ON CONFLICT (run_id, item_index) DO NOTHING`,
				runID, res.item.ItemIndex, res.item.ItemID, res.item.Query, gold, res.item.GoldAnswer, res.answer, ret, met)
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if (batch+1)*r.batchSize < r.TotalItems {
			if cancelled {
				return cancelRunTx(ctx, tx, runID)
			}
			return emit(batchEvent(runID, batch+1))
		}
		return s.completeTx(ctx, tx, emit, r)
	})
	if err == nil {
		s.crash("evaluate.batch_committed")
	}
	return err
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

// evaluateItems evaluates the batch's items, Concurrency at once.
func (s *Service) evaluateItems(ctx context.Context, r Run, batch int) ([]itemResult, error) {
	d, err := s.dataset(ctx, nil, r.DatasetID, r.KBID)
	if err != nil {
		return nil, err
	}
	items, err := s.items(ctx, r.DatasetID, batch*r.batchSize, r.batchSize)
	if err != nil {
		return nil, err
	}
	k, err := s.kbs.Load(ctx, r.KBID)
	if err != nil {
		return nil, err
	}
	var answerModel, judgeModel llm.ChatModel
	if r.cfg.AnswerLLM != "" {
		if answerModel, _, err = s.models.ChatModel(r.cfg.AnswerLLM); err != nil {
			return nil, failure.Unprocessable("invalid_answer_llm", "answer_llm %s: %v", r.cfg.AnswerLLM, err)
		}
	}
	if spec := r.cfg.judgeSpec(); spec != "" && d.HasGoldAnswers {
		if judgeModel, _, err = s.models.ChatModel(spec); err != nil {
			return nil, failure.Unprocessable("invalid_judge_llm", "judge model %s: %v", spec, err)
		}
	}
	out := make([]itemResult, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = s.evaluateItem(ctx, k, r.cfg, d, it, answerModel, judgeModel)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// evaluateItem retrieves one query and scores it.
func (s *Service) evaluateItem(ctx context.Context, k kb.KB, cfg RunConfig, d Dataset, it Item, answerModel, judgeModel llm.ChatModel) (itemResult, error) {
	res, err := s.ret.Query(ctx, k, it.Query, cfg.Retrieval, "")
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
	out := itemResult{item: it, retrieved: res, metrics: map[string]any{}}
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
	return out, nil
}
