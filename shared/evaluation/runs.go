package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// RunInput starts a run: POST …/runs {dataset_id, name?, model_config?}.
// ModelConfig (alias retrieval_config) overrides the KB's retrieval options
// and may name answer_llm and judge_llm ("provider:model").
type RunInput struct {
	DatasetID   string          `json:"dataset_id"`
	Name        *string         `json:"name"`
	ModelConfig json.RawMessage `json:"model_config"`
	// RetrievalConfig is the original's field name behind the model_config alias.
	RetrievalConfig json.RawMessage `json:"retrieval_config"`
}

// RunConfig is a run's frozen configuration: the KB's retrieval options
// overridden by the request, and the answer and judge models.
type RunConfig struct {
	kb.Retrieval
	AnswerLLM string `json:"answer_llm,omitempty"`
	JudgeLLM  string `json:"judge_llm,omitempty"`
}

// judgeSpec is the judge model: judge_llm, else answer_llm.
func (c RunConfig) judgeSpec() string {
	if c.JudgeLLM != "" {
		return c.JudgeLLM
	}
	return c.AnswerLLM
}

// ResolveConfig overlays raw (model_config) on the KB's retrieval options:
// answer_llm and judge_llm are taken out, every other key must be a
// retrieval option of the right type (422 invalid_query_params otherwise).
func ResolveConfig(k kb.KB, raw json.RawMessage) (RunConfig, error) {
	var c RunConfig
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return c, failure.Unprocessable("invalid_query_params", "model_config must be an object: %v", err)
		}
	}
	for _, key := range []string{"answer_llm", "judge_llm"} {
		if v, ok := m[key]; ok {
			var s string
			if string(v) != "null" {
				if err := json.Unmarshal(v, &s); err != nil {
					return c, failure.Unprocessable("invalid_query_params", "%s must be a model spec (provider:model)", key)
				}
			}
			if key == "answer_llm" {
				c.AnswerLLM = s
			} else {
				c.JudgeLLM = s
			}
			delete(m, key)
		}
	}
	rest, _ := json.Marshal(m)
	if m == nil {
		rest = nil
	}
	ret, err := k.Retrieval().Overlay(rest)
	if err != nil {
		return c, err
	}
	c.Retrieval = ret
	return c, nil
}

// Run is an evaluation run as listed.
type Run struct {
	RunID           string          `json:"run_id"`
	Name            string          `json:"name"`
	KBID            string          `json:"kb_id"`
	DatasetID       string          `json:"dataset_id"`
	Status          string          `json:"status"`
	StartedAt       time.Time       `json:"started_at"`
	CompletedAt     *time.Time      `json:"completed_at"`
	TotalItems      int             `json:"total_items"`
	CompletedItems  int             `json:"completed_items"`
	OverallScore    *float64        `json:"overall_score"`
	RetrievalConfig json.RawMessage `json:"retrieval_config"`
	Metrics         map[string]any  `json:"metrics"`
	ScheduleID      *string         `json:"schedule_id,omitempty"`
	GateStatus      *string         `json:"gate_status,omitempty"`
	Gate            json.RawMessage `json:"gate,omitempty"`
	CreatedBy       string          `json:"created_by"`
	batchSize       int
	nextBatch       int
	cfg             RunConfig
}

const runCols = `run_id, name, kb_id, dataset_id, status, started_at, completed_at, total_items, completed_items, overall_score,
	retrieval_config, metrics, schedule_id, gate_status, gate, created_by, batch_size, next_batch`

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	var gate []byte
	err := row.Scan(&r.RunID, &r.Name, &r.KBID, &r.DatasetID, &r.Status, &r.StartedAt, &r.CompletedAt, &r.TotalItems, &r.CompletedItems,
		&r.OverallScore, &r.RetrievalConfig, &r.Metrics, &r.ScheduleID, &r.GateStatus, &gate, &r.CreatedBy, &r.batchSize, &r.nextBatch)
	if gate != nil {
		r.Gate = gate
	}
	if err == nil {
		_ = json.Unmarshal(r.RetrievalConfig, &r.cfg)
	}
	return r, err
}

// runName is the original's default name: eval-YYYYMMDD-<6 hex of the id>.
func runName(name *string, runID string, at time.Time) string {
	if name != nil && strings.TrimSpace(*name) != "" {
		return strings.TrimSpace(*name)
	}
	return "eval-" + at.UTC().Format("20060102") + "-" + strings.TrimPrefix(runID, "run_")[:6]
}

// StartRun starts a run of a ready dataset of a KB sub may manage: the run
// row and its first batch's event commit together.
func (s *Service) StartRun(ctx context.Context, sub access.Subject, kbID string, in RunInput) (string, error) {
	k, err := s.kbs.GetManaged(ctx, sub, kbID)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(in.DatasetID) == "" {
		return "", failure.Invalid("missing_dataset_id", "dataset_id is required")
	}
	if in.Name != nil && utf8.RuneCountInString(*in.Name) > 100 {
		return "", failure.Invalid("invalid_name", "name is longer than 100 characters")
	}
	raw := in.ModelConfig
	if len(raw) == 0 {
		raw = in.RetrievalConfig
	}
	cfg, err := ResolveConfig(k, raw)
	if err != nil {
		return "", err
	}
	d, err := s.dataset(ctx, nil, in.DatasetID, kbID)
	if err != nil {
		return "", err
	}
	return s.startRun(ctx, kbID, d, in.Name, cfg, sub.UID, nil)
}

// fireAt is the schedule and due time a scheduled run is started for.
type fireAt struct {
	scheduleID string
	due        time.Time
}

// startRun creates the run of dataset d (of kbID, as read by the caller)
// with cfg and its first batch's event in one statement: one round trip,
// its own transaction. With fire, the schedule's fire row (schedule, due
// time) is written by the same statement and guards it: a due time fired
// already starts nothing ("" and no error), however many ticks race for it.
func (s *Service) startRun(ctx context.Context, kbID string, d Dataset, name *string, cfg RunConfig, createdBy string, fire *fireAt) (string, error) {
	datasetID := d.DatasetID
	if !d.Ready() {
		return "", ErrDatasetNotReady
	}
	if d.ItemCount == 0 { // a ready dataset's item_count is its items' count
		return "", failure.Invalid("empty_dataset", "the dataset has no items")
	}
	runID := newID("run_", 4)
	conf, _ := json.Marshal(cfg)
	args := []any{runID, runName(name, runID, time.Now()), kbID, datasetID, conf, d.ItemCount, s.cfg.BatchSize, nil, createdBy}
	guard := "(SELECT 1) one"
	sql := "WITH "
	if fire != nil {
		args[7] = fire.scheduleID
		args = append(args, fire.due)
		sql += `f AS (INSERT INTO evaluation_schedule_fires (schedule_id, due_at, run_id) VALUES ($8, $10, $1)
			ON CONFLICT DO NOTHING RETURNING 1), `
		guard = "f"
	}
	sql += `r AS (INSERT INTO evaluation_runs (run_id, name, kb_id, dataset_id, status, retrieval_config, total_items, batch_size,
		schedule_id, created_by) SELECT $1::text, $2::text, $3::text, $4::text, 'running', $5::jsonb, $6::int, $7::int, $8::text, $9::text
		FROM ` + guard + ` RETURNING run_id), `
	ev, err := s.ob.InsertCTE(ctx, batchEvent(runID, 0), "o", "r", len(args)+1)
	if err != nil {
		return "", err
	}
	var started *string
	var id *int64
	if err := s.pool.QueryRow(ctx, sql+ev.SQL+` SELECT (SELECT run_id FROM r), (SELECT id FROM o)`,
		append(args, ev.Args...)...).Scan(&started, &id); err != nil {
		return "", err
	}
	if started == nil {
		return "", nil
	}
	if row, ok := ev.Row(id); ok {
		s.ob.Publish(ctx, []outbox.Row{row})
	}
	return runID, nil
}

func batchEvent(runID string, batch int) outbox.Pending {
	return outbox.Pending{Payload: events.EvaluationBatchReady{RunID: runID, Batch: batch},
		DedupeKey: fmt.Sprintf("evaluation-batch:%s:%d", runID, batch)}
}

// Runs lists a KB's runs, newest first.
func (s *Service) Runs(ctx context.Context, sub access.Subject, kbID string) ([]Run, error) {
	if _, err := s.kbs.Get(ctx, sub, kbID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM evaluation_runs WHERE kb_id = $1 ORDER BY started_at DESC, id DESC`, kbID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
}

var runIDPattern = regexp.MustCompile(`^run_[a-f0-9]{8}$`)

// run loads run runID of kbID.
func (s *Service) run(ctx context.Context, runID, kbID string) (Run, error) {
	if !runIDPattern.MatchString(runID) {
		return Run{}, failure.Invalid("invalid_run_id", "Invalid run_id format")
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM evaluation_runs WHERE run_id = $1 AND kb_id = $2`, runID, kbID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrRunNotFound
	}
	return r, err
}

// RunItem is one item's result.
type RunItem struct {
	ItemIndex       int             `json:"item_index"`
	Query           string          `json:"query"`
	GoldChunkIDs    []string        `json:"gold_chunk_ids"`
	GoldAnswer      *string         `json:"gold_answer"`
	GeneratedAnswer *string         `json:"generated_answer"`
	RetrievedChunks json.RawMessage `json:"retrieved_chunks"`
	Metrics         map[string]any  `json:"metrics"`
}

// RunPage is a run with a page of its item results.
type RunPage struct {
	Run
	Items      []RunItem      `json:"items"`
	Pagination map[string]any `json:"pagination"`
}

// Result filters of RunResults.
const (
	FilterAll               = "all"
	FilterAnswerErrors      = "answer_errors"
	FilterErrorsOrLowRecall = "errors_or_low_recall"
	FilterLegacyErrors      = "legacy_errors" // error_only=true
)

// keep tells whether an item passes filter. An error is an answer scored
// ≤ 0.5 or, for errors_or_low_recall (and the original's error_only), also
// any recall@k below 0.3.
func keep(filter string, m map[string]any) bool {
	score, judged := m["score"].(float64)
	answerErr := judged && score <= 0.5
	switch filter {
	case FilterAnswerErrors:
		return answerErr
	case FilterErrorsOrLowRecall, FilterLegacyErrors:
		if answerErr {
			return true
		}
		for k, v := range m {
			if f, ok := v.(float64); ok && strings.HasPrefix(k, "recall@") && f < 0.3 {
				return true
			}
		}
		return false
	}
	return true
}

// RunResults returns run runID of kbID with page page of its item results
// (filter: all, answer_errors, errors_or_low_recall, legacy_errors).
func (s *Service) RunResults(ctx context.Context, sub access.Subject, kbID, runID string, page, size int, filter string) (RunPage, error) {
	if err := CheckPage(page, size); err != nil {
		return RunPage{}, err
	}
	switch filter {
	case "", FilterAll, FilterAnswerErrors, FilterErrorsOrLowRecall, FilterLegacyErrors:
	default:
		return RunPage{}, failure.Invalid("invalid_result_filter", "无效的评估结果筛选条件")
	}
	if _, err := s.kbs.Get(ctx, sub, kbID); err != nil {
		return RunPage{}, err
	}
	r, err := s.run(ctx, runID, kbID)
	if err != nil {
		return RunPage{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT item_index, query_text, gold_chunk_ids, gold_answer, generated_answer, retrieved_chunks, metrics
		FROM evaluation_run_items WHERE run_id = $1 ORDER BY item_index`, runID)
	if err != nil {
		return RunPage{}, err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RunItem, error) {
		var it RunItem
		err := row.Scan(&it.ItemIndex, &it.Query, &it.GoldChunkIDs, &it.GoldAnswer, &it.GeneratedAnswer, &it.RetrievedChunks, &it.Metrics)
		return it, err
	})
	if err != nil {
		return RunPage{}, err
	}
	items := []RunItem{}
	total := 0
	for _, it := range all {
		if !keep(filter, it.Metrics) {
			continue
		}
		if total >= (page-1)*size && total < page*size {
			items = append(items, it)
		}
		total++
	}
	if filter == "" {
		filter = FilterAll
	}
	return RunPage{Run: r, Items: items, Pagination: map[string]any{"current_page": page, "page_size": size, "total": total,
		"total_pages": (total + size - 1) / size, "error_only": filter == FilterLegacyErrors, "result_filter": filter}}, nil
}

// DeleteRun deletes run runID of a KB sub may manage, with its results.
// A batch still in flight finds no run and does nothing.
func (s *Service) DeleteRun(ctx context.Context, sub access.Subject, kbID, runID string) error {
	if _, err := s.kbs.GetManaged(ctx, sub, kbID); err != nil {
		return err
	}
	if _, err := s.run(ctx, runID, kbID); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM evaluation_runs WHERE run_id = $1 AND kb_id = $2`, runID, kbID)
	return err
}
