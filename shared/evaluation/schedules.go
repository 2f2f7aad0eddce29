package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/robfig/cron/v3"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// ErrScheduleNotFound: no such schedule, or one of a KB the caller cannot read.
var ErrScheduleNotFound = failure.NotFound("schedule_not_found", "evaluation schedule not found")

// ErrAdminRequired: a RAG evaluation schedule or history needs the admin
// role, as every RAG evaluation route of the original; suites (and their
// schedules and history) are every user's own.
var ErrAdminRequired = failure.Forbidden("admin_required", "RAG evaluation schedules and history need the admin role; schedule your own suites with suite_id")

// ragAllowed tells whether sub may see RAG evaluations at all (the
// original's get_admin_user, before the KB's permission).
func ragAllowed(sub access.Subject) bool { return sub.Role == "admin" || sub.Role == "superadmin" }

// Gate compares a scheduled run's metric with a baseline: the last passing
// run of the schedule (baseline "last_passing", the default) or a pinned
// run; a value below baseline − tolerance is a regression.
type Gate struct {
	Metric      string  `json:"metric"`
	Baseline    string  `json:"baseline"`
	PinnedRunID string  `json:"pinned_run_id,omitempty"`
	Tolerance   float64 `json:"tolerance"`
}

// Schedule runs a RAG evaluation template (kb_id, dataset_id,
// model_config) or an agent evaluation suite (suite_id) on a cron schedule;
// WebhookURL, when set, is told of regressions.
type Schedule struct {
	ScheduleID  string          `json:"schedule_id"`
	KBID        string          `json:"kb_id,omitempty"`
	SuiteID     string          `json:"suite_id,omitempty"`
	WebhookURL  string          `json:"webhook_url,omitempty"`
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	DatasetID   string          `json:"dataset_id,omitempty"`
	ModelConfig json.RawMessage `json:"model_config"`
	Gate        *Gate           `json:"gate"`
	Enabled     bool            `json:"enabled"`
	CreatedBy   string          `json:"created_by"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// ScheduleInput creates or changes a schedule (absent fields keep their
// value on change). Target: a RAG run template (kb_id, dataset_id,
// model_config) or a suite (suite_id), fixed at creation.
type ScheduleInput struct {
	KBID        string          `json:"kb_id"`
	SuiteID     string          `json:"suite_id"`
	WebhookURL  *string         `json:"webhook_url"`
	Name        *string         `json:"name"`
	Cron        *string         `json:"cron"`
	Timezone    *string         `json:"timezone"`
	DatasetID   *string         `json:"dataset_id"`
	ModelConfig json.RawMessage `json:"model_config"`
	Gate        *Gate           `json:"gate"`
	Enabled     *bool           `json:"enabled"`
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronCache keeps parsed cron expressions and loaded time zones for ticks
// (time.LoadLocation reads the zone database on every call). Entries are
// few: one per distinct (cron, timezone) of the schedules.
type cronCache struct{ m sync.Map }

type parsedCron struct {
	sched cron.Schedule
	loc   *time.Location
}

func (c *cronCache) parse(expr, tz string) (cron.Schedule, *time.Location, error) {
	key := expr + "\x00" + tz
	if v, ok := c.m.Load(key); ok {
		p := v.(parsedCron)
		return p.sched, p.loc, nil
	}
	sched, loc, err := parseCron(expr, tz)
	if err == nil {
		c.m.Store(key, parsedCron{sched, loc})
	}
	return sched, loc, err
}

func parseCron(expr, tz string) (cron.Schedule, *time.Location, error) {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		return nil, nil, failure.Invalid("invalid_timezone", "timezone %q is not an IANA time zone", tz)
	}
	if strings.Contains(expr, "TZ=") {
		return nil, nil, failure.Invalid("invalid_cron", "set the time zone in timezone, not in the cron expression")
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, nil, failure.Invalid("invalid_cron", "cron %q: %v", expr, err)
	}
	return sched, loc, nil
}

func (g *Gate) check() error {
	if g == nil {
		return nil
	}
	if g.Metric == "" {
		g.Metric = "overall_score"
	}
	if g.Baseline == "" {
		g.Baseline = "last_passing"
	}
	switch {
	case g.Baseline != "last_passing" && g.Baseline != "pinned":
		return failure.Invalid("invalid_gate", "gate.baseline must be last_passing or pinned")
	case g.Baseline == "pinned" && g.PinnedRunID == "":
		return failure.Invalid("invalid_gate", "a pinned baseline needs gate.pinned_run_id")
	case g.Tolerance < 0 || g.Tolerance > 1:
		return failure.Invalid("invalid_gate", "gate.tolerance must be between 0 and 1")
	}
	return nil
}

const scheduleCols = `schedule_id, COALESCE(kb_id, ''), COALESCE(suite_id, ''), COALESCE(webhook_url, ''), name, cron, timezone,
	COALESCE(dataset_id, ''), model_config, gate, enabled, created_by, created_at, updated_at`

func scanSchedule(row pgx.Row) (Schedule, error) {
	var s Schedule
	var gate []byte
	err := row.Scan(&s.ScheduleID, &s.KBID, &s.SuiteID, &s.WebhookURL, &s.Name, &s.Cron, &s.Timezone, &s.DatasetID, &s.ModelConfig, &gate, &s.Enabled,
		&s.CreatedBy, &s.CreatedAt, &s.UpdatedAt)
	if len(gate) > 0 && string(gate) != "null" {
		s.Gate = &Gate{}
		_ = json.Unmarshal(gate, s.Gate)
	}
	return s, err
}

// validate checks a schedule against its target: cron and zone, the
// webhook, the gate and, for a RAG template, the dataset of the KB and the
// model_config as a run would resolve it.
func (s *Service) validateSchedule(ctx context.Context, k kb.KB, sc *Schedule) error {
	if _, _, err := parseCron(sc.Cron, sc.Timezone); err != nil {
		return err
	}
	if err := s.checkWebhook(ctx, sc.WebhookURL); err != nil {
		return err
	}
	if sc.SuiteID != "" {
		if sc.Gate != nil && sc.Gate.Metric == "" {
			sc.Gate.Metric = "pass_rate"
		}
		return sc.Gate.check()
	}
	if _, err := s.dataset(ctx, nil, sc.DatasetID, k.KBID); err != nil {
		return err
	}
	if _, err := ResolveConfig(k, sc.ModelConfig); err != nil {
		return err
	}
	return sc.Gate.check()
}

// CreateSchedule adds a schedule on a KB sub may manage (admins), or on a
// suite of sub's (any user).
func (s *Service) CreateSchedule(ctx context.Context, sub access.Subject, in ScheduleInput) (Schedule, error) {
	var k kb.KB
	switch {
	case in.SuiteID != "" && in.KBID != "":
		return Schedule{}, failure.Invalid("invalid_schedule", "a schedule targets either a kb_id (with a dataset_id) or a suite_id")
	case in.SuiteID != "":
		if _, err := s.suite(ctx, sub, in.SuiteID); err != nil {
			return Schedule{}, err
		}
	case !ragAllowed(sub):
		return Schedule{}, ErrAdminRequired
	default:
		var err error
		if k, err = s.kbs.GetManaged(ctx, sub, in.KBID); err != nil {
			return Schedule{}, err
		}
	}
	sc := Schedule{KBID: in.KBID, SuiteID: in.SuiteID, Timezone: "UTC", ModelConfig: json.RawMessage("{}"), Enabled: true, Gate: in.Gate}
	apply(&sc, in)
	if sc.Cron == "" || (sc.SuiteID == "" && sc.DatasetID == "") {
		return Schedule{}, failure.Invalid("invalid_schedule", "cron and dataset_id (or suite_id) are required")
	}
	if sc.SuiteID != "" && sc.DatasetID != "" {
		return Schedule{}, failure.Invalid("invalid_schedule", "a suite schedule takes no dataset_id")
	}
	if err := s.validateSchedule(ctx, k, &sc); err != nil {
		return Schedule{}, err
	}
	gate, _ := json.Marshal(sc.Gate)
	return scanSchedule(s.pool.QueryRow(ctx, `INSERT INTO evaluation_schedules (schedule_id, kb_id, suite_id, webhook_url, name, cron, timezone,
		dataset_id, model_config, gate, enabled, created_by) VALUES ($1,NULLIF($2,''),NULLIF($3,''),NULLIF($4,''),$5,$6,$7,NULLIF($8,''),$9,$10,$11,$12)
		RETURNING `+scheduleCols,
		newID("sched_", 4), sc.KBID, sc.SuiteID, sc.WebhookURL, sc.Name, sc.Cron, sc.Timezone, sc.DatasetID, sc.ModelConfig, gate, sc.Enabled, sub.UID))
}

func apply(sc *Schedule, in ScheduleInput) {
	if in.Name != nil {
		sc.Name = *in.Name
	}
	if in.Cron != nil {
		sc.Cron = strings.TrimSpace(*in.Cron)
	}
	if in.Timezone != nil {
		sc.Timezone = *in.Timezone
	}
	if in.DatasetID != nil {
		sc.DatasetID = *in.DatasetID
	}
	if len(in.ModelConfig) > 0 && string(in.ModelConfig) != "null" {
		sc.ModelConfig = in.ModelConfig
	}
	if in.Gate != nil {
		sc.Gate = in.Gate
	}
	if in.Enabled != nil {
		sc.Enabled = *in.Enabled
	}
	if in.WebhookURL != nil {
		sc.WebhookURL = strings.TrimSpace(*in.WebhookURL)
	}
}

// schedule loads a schedule and checks sub's access to its target: a
// suite of sub's, or a KB sub may read (manage) when sub is an admin. Any
// other schedule is not found.
func (s *Service) schedule(ctx context.Context, sub access.Subject, id string, manage bool) (Schedule, kb.KB, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleCols+` FROM evaluation_schedules WHERE schedule_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Schedule{}, kb.KB{}, ErrScheduleNotFound
	}
	if err != nil {
		return Schedule{}, kb.KB{}, err
	}
	var k kb.KB
	if sc.SuiteID != "" { // a suite's schedules are its owner's
		if _, err := s.suite(ctx, sub, sc.SuiteID); err != nil {
			return Schedule{}, kb.KB{}, ErrScheduleNotFound
		}
		return sc, k, nil
	}
	if !ragAllowed(sub) {
		return Schedule{}, kb.KB{}, ErrScheduleNotFound
	}
	if manage {
		k, err = s.kbs.GetManaged(ctx, sub, sc.KBID)
	} else {
		k, err = s.kbs.Get(ctx, sub, sc.KBID)
	}
	if errors.Is(err, kb.ErrNotFound) {
		return Schedule{}, kb.KB{}, ErrScheduleNotFound
	}
	return sc, k, err
}

// GetSchedule returns a schedule of a KB sub may read, or of a suite of sub's.
func (s *Service) GetSchedule(ctx context.Context, sub access.Subject, id string) (Schedule, error) {
	sc, _, err := s.schedule(ctx, sub, id, false)
	return sc, err
}

// Schedules lists the schedules of sub's suites and, for an admin, of the
// KBs sub may read.
func (s *Service) Schedules(ctx context.Context, sub access.Subject) ([]Schedule, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleCols+` FROM evaluation_schedules ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return nil, err
	}
	out := []Schedule{}
	readable := map[string]bool{}
	for _, sc := range all {
		if sc.SuiteID != "" {
			if sc.CreatedBy == sub.UID {
				if _, err := s.suite(ctx, sub, sc.SuiteID); err == nil {
					out = append(out, sc)
				}
			}
			continue
		}
		if !ragAllowed(sub) {
			continue
		}
		ok, seen := readable[sc.KBID]
		if !seen {
			_, err := s.kbs.Get(ctx, sub, sc.KBID)
			ok = err == nil
			readable[sc.KBID] = ok
		}
		if ok {
			out = append(out, sc)
		}
	}
	return out, nil
}

// UpdateSchedule changes a schedule of a KB sub may manage, or of a suite of sub's.
func (s *Service) UpdateSchedule(ctx context.Context, sub access.Subject, id string, in ScheduleInput) (Schedule, error) {
	sc, k, err := s.schedule(ctx, sub, id, true)
	if err != nil {
		return Schedule{}, err
	}
	apply(&sc, in)
	if err := s.validateSchedule(ctx, k, &sc); err != nil {
		return Schedule{}, err
	}
	if sc.SuiteID != "" && sc.DatasetID != "" {
		return Schedule{}, failure.Invalid("invalid_schedule", "a suite schedule takes no dataset_id")
	}
	gate, _ := json.Marshal(sc.Gate)
	return scanSchedule(s.pool.QueryRow(ctx, `UPDATE evaluation_schedules SET name = $2, cron = $3, timezone = $4, dataset_id = NULLIF($5,''),
		model_config = $6, gate = $7, enabled = $8, webhook_url = NULLIF($9,''), updated_at = now() WHERE schedule_id = $1 RETURNING `+scheduleCols,
		id, sc.Name, sc.Cron, sc.Timezone, sc.DatasetID, sc.ModelConfig, gate, sc.Enabled, sc.WebhookURL))
}

// DeleteSchedule deletes a schedule of a KB sub may manage, or of a suite
// of sub's (its runs stay).
func (s *Service) DeleteSchedule(ctx context.Context, sub access.Subject, id string) error {
	if _, _, err := s.schedule(ctx, sub, id, true); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM evaluation_schedules WHERE schedule_id = $1`, id)
	return err
}

// tickLookback bounds how far back a tick looks for a schedule's due time:
// schedulers tick every minute, and a tick after an outage starts at most
// the latest due evaluation, never a backlog.
const tickLookback = time.Hour

// dueAt is the latest fire time of sched in loc in (after, at].
func dueAt(sched cron.Schedule, loc *time.Location, after, at time.Time) (time.Time, bool) {
	var due time.Time
	for t := sched.Next(after.In(loc)); !t.After(at); t = sched.Next(t) {
		due = t
	}
	return due, !due.IsZero()
}

// Tick starts every enabled schedule's evaluation due at or before at (its
// latest fire time within the lookback, not before the schedule existed),
// once: the fire row (schedule, due time) and the run commit together, so a
// tick delivered twice or to several instances starts one run. It returns
// the runs it started.
func (s *Service) Tick(ctx context.Context, at time.Time) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleCols+` FROM evaluation_schedules WHERE enabled ORDER BY id`)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return nil, err
	}
	var started []string
	var errs []error
	for _, sc := range all {
		sched, loc, err := s.crons.parse(sc.Cron, sc.Timezone)
		if err != nil {
			continue // validated on save; a zone database change cannot be fixed by retrying
		}
		after := at.Add(-tickLookback)
		if sc.CreatedAt.After(after) {
			after = sc.CreatedAt.Add(-time.Second)
		}
		due, ok := dueAt(sched, loc, after, at)
		if !ok {
			continue
		}
		runID, err := s.fire(ctx, sc, due)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.ScheduleID, err))
			continue
		}
		if runID != "" {
			started = append(started, runID)
		}
	}
	return started, errors.Join(errs...)
}

// fire starts sc's run for due unless it was started already: two reads
// at once (the KB's retrieval options, under the schedule's model_config,
// and the dataset: one round trip's wait) and one statement writing the
// fire row, the run and its first batch's event (startRun).
func (s *Service) fire(ctx context.Context, sc Schedule, due time.Time) (string, error) {
	if sc.SuiteID != "" {
		return s.fireSuite(ctx, sc, due)
	}
	var d Dataset
	var dErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		d, dErr = s.dataset(ctx, nil, sc.DatasetID, sc.KBID)
	}()
	k, err := s.kbs.LoadSettings(ctx, sc.KBID)
	<-read
	if err != nil {
		return "", err
	}
	if dErr != nil {
		return "", dErr
	}
	cfg, err := ResolveConfig(k, sc.ModelConfig)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s %s", strings.TrimSpace(sc.Name+" scheduled"), due.UTC().Format(time.RFC3339))
	return s.startRun(ctx, sc.KBID, d, &name, cfg, sc.CreatedBy, &fireAt{scheduleID: sc.ScheduleID, due: due})
}

// gateTx applies the gate of the schedule that started RAG run r, if any.
func (s *Service) gateTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, r Run, metrics map[string]float64, overall *float64) error {
	if r.ScheduleID == nil {
		return nil
	}
	return s.applyGateTx(ctx, tx, emit, gateTarget{runID: r.RunID, scheduleID: *r.ScheduleID, kbID: r.KBID, table: "evaluation_runs"}, metrics, overall)
}

// gateTarget is the run a gate judges: a RAG run (evaluation_runs, of kbID)
// or a suite run (evaluation_suite_runs, of suiteID).
type gateTarget struct {
	runID, scheduleID, kbID, suiteID string
	table                            string
}

// applyGateTx applies the schedule's gate to a completed run: it passes or
// regresses against its baseline (the schedule's last passing run, or a
// pinned run); a regression emits io.yuxi.evaluation.regressed.v1 in the
// same transaction.
func (s *Service) applyGateTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, t gateTarget, metrics map[string]float64, overall *float64) error {
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT gate FROM evaluation_schedules WHERE schedule_id = $1`, t.scheduleID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if err != nil {
		return err
	}
	var g Gate
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil
	}
	value, ok := metricOf(g.Metric, metrics, overall)
	verdict := map[string]any{"metric": g.Metric, "tolerance": g.Tolerance, "baseline_kind": g.Baseline}
	status := "passed"
	if !ok {
		verdict["note"] = "the run has no such metric"
	} else {
		verdict["value"] = value
		var baseRun string
		var baseMetrics map[string]float64
		var baseOverall *float64
		// t.table is one of two constants.
		q := `SELECT run_id, metrics, overall_score FROM ` + t.table + ` WHERE schedule_id = $1 AND status = 'completed'
			AND gate_status = 'passed' AND run_id <> $2 ORDER BY completed_at DESC LIMIT 1`
		args := []any{t.scheduleID, t.runID}
		if g.Baseline == "pinned" {
			q, args = `SELECT run_id, metrics, overall_score FROM `+t.table+` WHERE run_id = $1 AND status = 'completed'`, []any{g.PinnedRunID}
		}
		err := tx.QueryRow(ctx, q, args...).Scan(&baseRun, &baseMetrics, &baseOverall)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if base, ok := metricOf(g.Metric, baseMetrics, baseOverall); err == nil && ok {
			verdict["baseline"], verdict["baseline_run_id"] = base, baseRun
			if value < base-g.Tolerance-1e-12 {
				status = "regressed"
				if err := emit(outbox.Pending{Payload: events.EvaluationRegressed{RunID: t.runID, ScheduleID: t.scheduleID, KBID: t.kbID,
					SuiteID: t.suiteID, Metric: g.Metric, Value: value, Baseline: base, BaselineRunID: baseRun, Tolerance: g.Tolerance},
					DedupeKey: "evaluation-regressed:" + t.runID}); err != nil {
					return err
				}
			}
		} else {
			verdict["note"] = "no baseline yet: this run becomes it"
		}
	}
	v, _ := json.Marshal(verdict)
	_, err = tx.Exec(ctx, `UPDATE `+t.table+` SET gate_status = $2, gate = $3 WHERE run_id = $1`, t.runID, status, v)
	return err
}

func metricOf(name string, metrics map[string]float64, overall *float64) (float64, bool) {
	if name == "overall_score" {
		if overall == nil {
			return 0, false
		}
		return *overall, true
	}
	v, ok := metrics[name]
	return v, ok
}

// HistoryPoint is one completed run's value of a metric.
type HistoryPoint struct {
	RunID       string     `json:"run_id"`
	KBID        string     `json:"kb_id,omitempty"`
	SuiteID     string     `json:"suite_id,omitempty"`
	ScheduleID  *string    `json:"schedule_id"`
	CompletedAt *time.Time `json:"completed_at"`
	Value       *float64   `json:"value"`
	GateStatus  *string    `json:"gate_status"`
}

// History is metric (default overall_score) over time, oldest first, for
// the completed runs of target — a KB id, a suite id or a schedule id — or,
// without a target, of sub's suites and (admins) every KB sub may read.
// Suites and their schedules are their owner's; KB targets need the admin
// role.
func (s *Service) History(ctx context.Context, sub access.Subject, target, metric string) ([]HistoryPoint, error) {
	if metric == "" {
		metric = "overall_score"
	}
	var kbFilter, schedFilter string
	switch {
	case strings.HasPrefix(target, "suite_"):
		return s.suiteHistory(ctx, sub, target, "", metric)
	case strings.HasPrefix(target, "sched_"):
		sc, _, err := s.schedule(ctx, sub, target, false)
		if err != nil {
			return nil, err
		}
		if sc.SuiteID != "" {
			return s.suiteHistory(ctx, sub, sc.SuiteID, sc.ScheduleID, metric)
		}
		schedFilter = sc.ScheduleID
	case target == "":
		return s.allHistory(ctx, sub, metric)
	case !ragAllowed(sub):
		return nil, ErrAdminRequired
	default:
		if _, err := s.kbs.Get(ctx, sub, target); err != nil {
			return nil, err
		}
		kbFilter = target
	}
	return s.ragHistory(ctx, sub, kbFilter, schedFilter, metric)
}

// allHistory is History without a target: sub's suites' runs and, for an
// admin, the RAG runs of every KB sub may read, by completion time.
func (s *Service) allHistory(ctx context.Context, sub access.Subject, metric string) ([]HistoryPoint, error) {
	out, err := s.suiteHistory(ctx, sub, "", "", metric)
	if err != nil || !ragAllowed(sub) {
		return out, err
	}
	rag, err := s.ragHistory(ctx, sub, "", "", metric)
	if err != nil {
		return nil, err
	}
	out = append(rag, out...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].CompletedAt, out[j].CompletedAt
		return a != nil && b != nil && a.Before(*b)
	})
	return out, nil
}

// ragHistory is the RAG runs' points of a KB, a schedule, or every KB sub
// may read.
func (s *Service) ragHistory(ctx context.Context, sub access.Subject, kbFilter, schedFilter, metric string) ([]HistoryPoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT run_id, kb_id, schedule_id, completed_at, metrics, overall_score, gate_status FROM evaluation_runs
		WHERE status = 'completed' AND ($1 = '' OR kb_id = $1) AND ($2 = '' OR schedule_id = $2) ORDER BY completed_at, id`, kbFilter, schedFilter)
	if err != nil {
		return nil, err
	}
	type row struct {
		p       HistoryPoint
		metrics map[string]float64
		overall *float64
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.p.RunID, &x.p.KBID, &x.p.ScheduleID, &x.p.CompletedAt, &x.metrics, &x.overall, &x.p.GateStatus)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	out := []HistoryPoint{}
	readable := map[string]bool{}
	for _, x := range all {
		ok, seen := readable[x.p.KBID]
		if !seen {
			_, err := s.kbs.Get(ctx, sub, x.p.KBID)
			ok = err == nil
			readable[x.p.KBID] = ok
		}
		if !ok {
			continue
		}
		if v, has := metricOf(metric, x.metrics, x.overall); has {
			x.p.Value = &v
		}
		out = append(out, x.p)
	}
	return out, nil
}
