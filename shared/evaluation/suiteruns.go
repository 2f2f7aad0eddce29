package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// SuiteRunConfig is a suite run's frozen suite: the agent, the items (read
// from Langfuse when the suite names a dataset) and the limits.
type SuiteRunConfig struct {
	AgentSlug       string      `json:"agent_slug"`
	ModelSpec       string      `json:"model_spec,omitempty"`
	JudgeLLM        string      `json:"judge_llm,omitempty"`
	Concurrency     int         `json:"concurrency"`
	TimeoutSeconds  int         `json:"timeout_seconds"`
	LangfuseDataset *string     `json:"langfuse_dataset,omitempty"`
	Items           []SuiteItem `json:"items"`
}

// SuiteRun is a run of a suite.
type SuiteRun struct {
	RunID          string         `json:"run_id"`
	SuiteID        string         `json:"suite_id"`
	Name           string         `json:"name"`
	Status         string         `json:"status"`
	AgentSlug      string         `json:"agent_slug"`
	StartedAt      time.Time      `json:"started_at"`
	CompletedAt    *time.Time     `json:"completed_at"`
	TotalItems     int            `json:"total_items"`
	CompletedItems int            `json:"completed_items"`
	OverallScore   *float64       `json:"overall_score"`
	Metrics        map[string]any `json:"metrics"`
	ScheduleID     *string        `json:"schedule_id,omitempty"`
	GateStatus     *string        `json:"gate_status,omitempty"`
	Gate           map[string]any `json:"gate,omitempty"`
	CreatedBy      string         `json:"created_by"`
	cfg            SuiteRunConfig
	batchSize      int
	nextBatch      int
}

const suiteRunCols = `run_id, suite_id, name, status, config, started_at, completed_at, total_items, completed_items, overall_score,
	metrics, schedule_id, gate_status, gate, created_by, batch_size, next_batch`

func scanSuiteRun(row pgx.Row) (SuiteRun, error) {
	var r SuiteRun
	var conf []byte
	err := row.Scan(&r.RunID, &r.SuiteID, &r.Name, &r.Status, &conf, &r.StartedAt, &r.CompletedAt, &r.TotalItems, &r.CompletedItems,
		&r.OverallScore, &r.Metrics, &r.ScheduleID, &r.GateStatus, &r.Gate, &r.CreatedBy, &r.batchSize, &r.nextBatch)
	if err == nil {
		_ = json.Unmarshal(conf, &r.cfg)
		r.AgentSlug = r.cfg.AgentSlug
	}
	return r, err
}

// IsSuiteRun tells a suite run's id (srun_…) from a RAG run's (run_…).
func IsSuiteRun(runID string) bool { return strings.HasPrefix(runID, "srun_") }

var suiteRunIDPattern = regexp.MustCompile(`^srun_[a-f0-9]{8}$`)

// SuiteRunInput starts a suite run.
type SuiteRunInput struct {
	Name *string `json:"name"`
}

// suiteRunConfig freezes su for a run: its items, or the Langfuse
// dataset's items read now, each with the suite's checks before its own.
func (s *Service) suiteRunConfig(ctx context.Context, su Suite) (SuiteRunConfig, error) {
	cfg := SuiteRunConfig{AgentSlug: su.AgentSlug, ModelSpec: su.ModelSpec, JudgeLLM: su.JudgeLLM, Concurrency: su.Concurrency,
		TimeoutSeconds: su.TimeoutSeconds, LangfuseDataset: su.LangfuseDataset, Items: su.Items}
	if su.LangfuseDataset != nil {
		if s.langfuse == nil {
			return cfg, failure.Unprocessable("langfuse_unconfigured", "the suite reads a Langfuse dataset but LANGFUSE_* is not configured")
		}
		items, err := s.langfuse.DatasetItems(ctx, *su.LangfuseDataset)
		if _, coded := failure.As(err); err != nil && !coded {
			return cfg, failure.New(failure.KindUnavailable, "langfuse_unavailable", "reading the Langfuse dataset: %v", err)
		}
		if err != nil {
			return cfg, err
		}
		if len(items) > MaxSuiteItems {
			items = items[:MaxSuiteItems]
		}
		cfg.Items = items
	}
	if len(su.Checks) > 0 {
		items := make([]SuiteItem, len(cfg.Items))
		for i, it := range cfg.Items {
			it.Checks = append(append([]Check{}, su.Checks...), it.Checks...)
			items[i] = it
		}
		cfg.Items = items
	}
	if len(cfg.Items) == 0 {
		return cfg, failure.Invalid("empty_suite", "the suite has no items")
	}
	return cfg, nil
}

// StartSuiteRun starts a run of a suite of sub's: the run row and its first
// batch's event commit together.
func (s *Service) StartSuiteRun(ctx context.Context, sub access.Subject, suiteID string, in SuiteRunInput) (string, error) {
	su, err := s.suite(ctx, sub, suiteID)
	if err != nil {
		return "", err
	}
	if in.Name != nil && len([]rune(*in.Name)) > 100 {
		return "", failure.Invalid("invalid_name", "name is longer than 100 characters")
	}
	if s.agents == nil {
		return "", failure.New(failure.KindUnavailable, "agent_evaluation_unavailable", "agent evaluation is not configured on this server")
	}
	if err := s.agents.CheckAgent(ctx, sub, su.AgentSlug); err != nil {
		return "", err
	}
	cfg, err := s.suiteRunConfig(ctx, su)
	if err != nil {
		return "", err
	}
	var runID string
	err = s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		runID, err = s.startSuiteRunTx(ctx, tx, emit, su, cfg, in.Name, sub.UID, nil)
		return err
	})
	return runID, err
}

func (s *Service) startSuiteRunTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, su Suite, cfg SuiteRunConfig, name *string,
	createdBy string, scheduleID *string) (string, error) {
	runID := newID("srun_", 4)
	n := "suite-" + time.Now().UTC().Format("20060102") + "-" + strings.TrimPrefix(runID, "srun_")[:6]
	if name != nil && strings.TrimSpace(*name) != "" {
		n = strings.TrimSpace(*name)
	}
	conf, _ := json.Marshal(cfg)
	// A batch holds a few rounds of the suite's concurrency (at least 10
	// items): the unit of progress and of redone work after a crash.
	batch := max(s.cfg.BatchSize, 2*cfg.Concurrency)
	if _, err := tx.Exec(ctx, `INSERT INTO evaluation_suite_runs (run_id, suite_id, name, status, config, total_items, batch_size,
		schedule_id, created_by) VALUES ($1,$2,$3,'running',$4,$5,$6,$7,$8)`,
		runID, su.SuiteID, n, conf, len(cfg.Items), batch, scheduleID, createdBy); err != nil {
		return "", err
	}
	return runID, emit(batchEvent(runID, 0))
}

// SuiteRuns lists the runs of a suite of sub's, newest first.
func (s *Service) SuiteRuns(ctx context.Context, sub access.Subject, suiteID string) ([]SuiteRun, error) {
	if _, err := s.suite(ctx, sub, suiteID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+suiteRunCols+` FROM evaluation_suite_runs WHERE suite_id = $1 ORDER BY started_at DESC, id DESC`, suiteID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SuiteRun, error) { return scanSuiteRun(r) })
}

// SuiteRunItem is one item's result.
type SuiteRunItem struct {
	ItemIndex      int                       `json:"item_index"`
	Input          string                    `json:"input"`
	ExpectedOutput *string                   `json:"expected_output"`
	Status         string                    `json:"status"`
	Output         string                    `json:"output"`
	AgentRunID     *string                   `json:"agent_run_id"`
	ThreadID       *string                   `json:"thread_id"`
	Trajectory     *invoke.TrajectorySummary `json:"trajectory_summary"`
	Checks         []CheckOutcome            `json:"checks"`
	JudgeScore     *float64                  `json:"judge_score"`
	Passed         bool                      `json:"passed"`
	Error          *string                   `json:"error"`
	langfuseItemID string
}

// SuiteRunPage is a suite run with its item results.
type SuiteRunPage struct {
	SuiteRun
	Items []SuiteRunItem `json:"items"`
}

// GetSuiteRun returns run runID of a suite of sub's with its item results.
func (s *Service) GetSuiteRun(ctx context.Context, sub access.Subject, suiteID, runID string) (SuiteRunPage, error) {
	if _, err := s.suite(ctx, sub, suiteID); err != nil {
		return SuiteRunPage{}, err
	}
	if !suiteRunIDPattern.MatchString(runID) {
		return SuiteRunPage{}, ErrSuiteRunNotFound
	}
	r, err := scanSuiteRun(s.pool.QueryRow(ctx, `SELECT `+suiteRunCols+` FROM evaluation_suite_runs WHERE run_id = $1 AND suite_id = $2`, runID, suiteID))
	if errors.Is(err, pgx.ErrNoRows) {
		return SuiteRunPage{}, ErrSuiteRunNotFound
	}
	if err != nil {
		return SuiteRunPage{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT item_index, input, expected_output, status, output, agent_run_id, thread_id, trajectory, checks,
		judge_score, passed, error FROM evaluation_suite_run_items WHERE run_id = $1 ORDER BY item_index`, runID)
	if err != nil {
		return SuiteRunPage{}, err
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SuiteRunItem, error) {
		var it SuiteRunItem
		err := row.Scan(&it.ItemIndex, &it.Input, &it.ExpectedOutput, &it.Status, &it.Output, &it.AgentRunID, &it.ThreadID, &it.Trajectory,
			&it.Checks, &it.JudgeScore, &it.Passed, &it.Error)
		return it, err
	})
	if err != nil {
		return SuiteRunPage{}, err
	}
	return SuiteRunPage{SuiteRun: r, Items: items}, nil
}

// evaluateSuiteBatch is EvaluateBatch for a suite run: each item is one
// sample of the agent (a request id derived from the run and the item, so
// a redone batch finds the agent runs it started before), Concurrency at
// once, each waiting at most the suite's timeout and YUXI_SYNC_WAIT.
func (s *Service) evaluateSuiteBatch(ctx context.Context, runID string, batch int) error {
	r, err := scanSuiteRun(s.pool.QueryRow(ctx, `SELECT `+suiteRunCols+` FROM evaluation_suite_runs WHERE run_id = $1`, runID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.Status != "running" || r.nextBatch != batch {
		return nil
	}
	results, err := s.evaluateSuiteItems(ctx, r, batch)
	if _, coded := failure.As(err); coded {
		return s.failSuiteRun(ctx, r, err)
	}
	if err != nil {
		return err
	}
	if s.langfuse != nil && r.cfg.LangfuseDataset != nil {
		// At least once, with ids derived from the run and item: a redone
		// batch writes the same experiment items again.
		if err := s.langfuse.WriteBack(ctx, Experiment{Dataset: *r.cfg.LangfuseDataset, RunName: r.Name, RunID: r.RunID,
			AgentSlug: r.cfg.AgentSlug, Items: results}); err != nil {
			return err
		}
	}
	s.crash("evaluate.batch_evaluated")
	err = s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		tag, err := tx.Exec(ctx, `UPDATE evaluation_suite_runs SET next_batch = $3, completed_items = completed_items + $4
			WHERE run_id = $1 AND next_batch = $2 AND status = 'running'`, runID, batch, batch+1, len(results))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		var b pgx.Batch
		for _, it := range results {
			traj, _ := json.Marshal(it.Trajectory)
			if it.Trajectory == nil {
				traj = nil
			}
			checks, _ := json.Marshal(it.Checks)
			b.Queue(`INSERT INTO evaluation_suite_run_items (run_id, item_index, input, expected_output, status, output,
				agent_run_id, thread_id, trajectory, checks, judge_score, passed, error) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)
				ON CONFLICT (run_id, item_index) DO NOTHING`, runID, it.ItemIndex, it.Input, it.ExpectedOutput, it.Status, it.Output,
				it.AgentRunID, it.ThreadID, traj, checks, it.JudgeScore, it.Passed, it.Error)
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if (batch+1)*r.batchSize < r.TotalItems {
			return emit(batchEvent(runID, batch+1))
		}
		return s.completeSuiteTx(ctx, tx, emit, r)
	})
	if err == nil {
		s.crash("evaluate.batch_committed")
	}
	return err
}

func (s *Service) failSuiteRun(ctx context.Context, r SuiteRun, cause error) error {
	msg, _ := json.Marshal(map[string]string{"error": cause.Error()})
	_, err := s.pool.Exec(ctx, `UPDATE evaluation_suite_runs SET status = 'failed', metrics = $2, completed_at = now()
		WHERE run_id = $1 AND status = 'running'`, r.RunID, msg)
	return err
}

func (s *Service) evaluateSuiteItems(ctx context.Context, r SuiteRun, batch int) ([]SuiteRunItem, error) {
	if s.agents == nil {
		return nil, errors.New("agent evaluation is not configured in this process") // transient: another instance may have it
	}
	sub, err := s.subjectOf(ctx, r.CreatedBy)
	if err != nil {
		return nil, err
	}
	var judgeModel llm.ChatModel
	if r.cfg.JudgeLLM != "" {
		if judgeModel, _, err = s.models.ChatModel(r.cfg.JudgeLLM); err != nil {
			return nil, failure.Unprocessable("invalid_judge_llm", "judge model %s: %v", r.cfg.JudgeLLM, err)
		}
	}
	lo := batch * r.batchSize
	hi := min(lo+r.batchSize, len(r.cfg.Items))
	if lo >= hi {
		return nil, nil
	}
	out := make([]SuiteRunItem, hi-lo)
	errs := make([]error, hi-lo)
	sem := make(chan struct{}, max(r.cfg.Concurrency, 1))
	var wg sync.WaitGroup
	for i := lo; i < hi; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i-lo], errs[i-lo] = s.evaluateSuiteItem(ctx, sub, r, i, judgeModel)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// SampleRequestID is the request id of item index of suite run runID: the
// same for every delivery of its batch.
func SampleRequestID(runID string, index int) string { return fmt.Sprintf("eval-%s-%d", runID, index) }

func (s *Service) evaluateSuiteItem(ctx context.Context, sub access.Subject, r SuiteRun, index int, judgeModel llm.ChatModel) (SuiteRunItem, error) {
	it := r.cfg.Items[index]
	res := SuiteRunItem{ItemIndex: index, Input: it.Input, ExpectedOutput: it.ExpectedOutput, Checks: []CheckOutcome{}, langfuseItemID: it.LangfuseItemID}
	fail := func(status, msg string) (SuiteRunItem, error) {
		res.Status, res.Error = status, &msg
		for _, c := range it.Checks {
			res.Checks = append(res.Checks, CheckOutcome{Type: c.Type, Error: "not checked: the run did not complete"})
		}
		return res, nil
	}
	in := invoke.EvalInput{Query: it.Input, AgentSlug: r.cfg.AgentSlug, ModelSpec: r.cfg.ModelSpec}
	in.Meta.RequestID = SampleRequestID(r.RunID, index)
	exp := r.Name
	in.Evaluation.ExperimentName = &exp
	if r.cfg.LangfuseDataset != nil {
		in.Evaluation.DatasetName = r.cfg.LangfuseDataset
	}
	if it.LangfuseItemID != "" {
		id := it.LangfuseItemID
		in.Evaluation.DatasetItemID = &id
	}
	ictx, cancel := context.WithTimeout(ctx, time.Duration(r.cfg.TimeoutSeconds)*time.Second)
	defer cancel()
	out, err := s.agents.EvalRun(ictx, sub, in)
	if err != nil {
		switch fe, coded := failure.As(err); {
		case ctx.Err() != nil:
			return res, ctx.Err() // the batch itself ends: redone on redelivery
		case errors.Is(err, context.DeadlineExceeded):
			return fail("timeout", fmt.Sprintf("no answer within the suite's timeout (%ds)", r.cfg.TimeoutSeconds))
		case coded && fe.Code == invoke.ErrWaitTimeout.Code:
			return fail("timeout", "no answer within YUXI_SYNC_WAIT")
		case coded:
			return fail("error", err.Error())
		}
		return res, err
	}
	res.Output, res.AgentRunID, res.Trajectory = out.Output, out.AgentRunID, out.TrajectorySummary
	if out.ThreadID != "" {
		t := out.ThreadID
		res.ThreadID = &t
	}
	if out.Status != "completed" {
		msg := "the agent run ended " + out.Status
		if out.Error != nil && out.Error.Message != nil {
			msg += ": " + *out.Error.Message
		}
		return fail(orDefault(out.Status, "error"), msg)
	}
	res.Status, res.Passed = "completed", true
	var scores []float64
	for _, c := range it.Checks {
		o := runCheck(ctx, c, it, out.Output, judgeModel)
		res.Checks = append(res.Checks, o)
		res.Passed = res.Passed && o.Passed
		if o.Score != nil {
			scores = append(scores, *o.Score)
		}
	}
	if len(scores) > 0 {
		m := mean(scores)
		res.JudgeScore = &m
	}
	return res, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var t float64
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// completeSuiteTx aggregates a suite run's items (in item order) and ends
// it: pass_rate (the overall score), completed_rate, error_count,
// judge_score (mean of the judged items), check_pass_rate.<type>, and the
// trajectory means avg_duration_ms, avg_tool_calls, avg_steps and
// total_tokens. Then the schedule's gate, if any.
func (s *Service) completeSuiteTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, r SuiteRun) error {
	rows, err := tx.Query(ctx, `SELECT status, passed, judge_score, checks, trajectory FROM evaluation_suite_run_items
		WHERE run_id = $1 ORDER BY item_index`, r.RunID)
	if err != nil {
		return err
	}
	type row struct {
		status string
		passed bool
		judge  *float64
		checks []CheckOutcome
		traj   *invoke.TrajectorySummary
	}
	all, err := pgx.CollectRows(rows, func(rw pgx.CollectableRow) (row, error) {
		var x row
		err := rw.Scan(&x.status, &x.passed, &x.judge, &x.checks, &x.traj)
		return x, err
	})
	if err != nil {
		return err
	}
	metrics := SuiteMetrics(func(yield func(status string, passed bool, judge *float64, checks []CheckOutcome, traj *invoke.TrajectorySummary)) {
		for _, x := range all {
			yield(x.status, x.passed, x.judge, x.checks, x.traj)
		}
	})
	overall := metrics["pass_rate"]
	met, _ := json.Marshal(metrics)
	if _, err := tx.Exec(ctx, `UPDATE evaluation_suite_runs SET status = 'completed', metrics = $2, overall_score = $3, completed_at = now()
		WHERE run_id = $1`, r.RunID, met, overall); err != nil {
		return err
	}
	if r.ScheduleID == nil {
		return nil
	}
	return s.applyGateTx(ctx, tx, emit, gateTarget{runID: r.RunID, scheduleID: *r.ScheduleID, suiteID: r.SuiteID, table: "evaluation_suite_runs"},
		metrics, &overall)
}

// SuiteMetrics aggregates item results (see completeSuiteTx).
func SuiteMetrics(each func(yield func(status string, passed bool, judge *float64, checks []CheckOutcome, traj *invoke.TrajectorySummary))) map[string]float64 {
	var n, passed, completed, errs float64
	var judges, durations, tools, steps []float64
	var tokens float64
	checkPass, checkN := map[string]float64{}, map[string]float64{}
	each(func(status string, ok bool, judge *float64, checks []CheckOutcome, traj *invoke.TrajectorySummary) {
		n++
		if ok {
			passed++
		}
		if status == "completed" {
			completed++
		} else {
			errs++
		}
		if judge != nil {
			judges = append(judges, *judge)
		}
		for _, c := range checks {
			checkN[c.Type]++
			if c.Passed {
				checkPass[c.Type]++
			}
		}
		if traj != nil {
			if traj.DurationMS != nil {
				durations = append(durations, float64(*traj.DurationMS))
			}
			tools = append(tools, float64(traj.ToolCallCount))
			steps = append(steps, float64(traj.StepCount))
			if traj.Usage != nil {
				tokens += float64(traj.Usage.TotalTokens)
			}
		}
	})
	m := map[string]float64{"items": n, "passed": passed, "error_count": errs, "total_tokens": tokens}
	if n > 0 {
		m["pass_rate"], m["completed_rate"] = passed/n, completed/n
	} else {
		m["pass_rate"], m["completed_rate"] = 0, 0
	}
	if len(judges) > 0 {
		m["judge_score"] = mean(judges)
	}
	if len(durations) > 0 {
		m["avg_duration_ms"] = mean(durations)
	}
	if len(tools) > 0 {
		m["avg_tool_calls"], m["avg_steps"] = mean(tools), mean(steps)
	}
	types := make([]string, 0, len(checkN))
	for t := range checkN {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		m["check_pass_rate."+t] = checkPass[t] / checkN[t]
	}
	return m
}
