package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/netguard"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// fireSuite starts the suite run of schedule sc for due unless it was
// started already. The suite's items are frozen (a Langfuse dataset read)
// before the transaction; the fire row and the run commit together.
func (s *Service) fireSuite(ctx context.Context, sc Schedule, due time.Time) (string, error) {
	var done bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM evaluation_schedule_fires WHERE schedule_id = $1 AND due_at = $2)`,
		sc.ScheduleID, due).Scan(&done); err != nil || done {
		return "", err
	}
	su, err := scanSuite(s.pool.QueryRow(ctx, `SELECT `+suiteCols+` FROM evaluation_suites WHERE suite_id = $1`, sc.SuiteID))
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil // deleted with its schedules
	}
	if err != nil {
		return "", err
	}
	cfg, err := s.suiteRunConfig(ctx, su)
	if err != nil {
		return "", err
	}
	var runID string
	err = s.ob.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		tag, err := tx.Exec(ctx, `INSERT INTO evaluation_schedule_fires (schedule_id, due_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			sc.ScheduleID, due)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		name := fmt.Sprintf("%s %s", strings.TrimSpace(sc.Name+" scheduled"), due.UTC().Format(time.RFC3339))
		id := sc.ScheduleID
		if runID, err = s.startSuiteRunTx(ctx, tx, emit, su, cfg, &name, su.CreatedBy, &id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE evaluation_schedule_fires SET run_id = $3 WHERE schedule_id = $1 AND due_at = $2`, sc.ScheduleID, due, runID)
		return err
	})
	return runID, err
}

// checkWebhook refuses a webhook URL that is not http(s) or that the
// outbound guard would refuse (422 outbound_denied).
func (s *Service) checkWebhook(ctx context.Context, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 {
		return failure.Invalid("invalid_webhook_url", "webhook_url must be an http(s) URL")
	}
	if s.guard == nil {
		return failure.Unprocessable("outbound_denied", "this server has no outbound client for webhooks")
	}
	if err := s.guard.CheckURL(ctx, u); err != nil {
		if errors.Is(err, netguard.ErrDenied) {
			return failure.Unprocessable("outbound_denied", "%v", err)
		}
		return failure.Unprocessable("invalid_webhook_url", "webhook_url: %v", err)
	}
	return nil
}

// NotifyRegression posts a regression to its schedule's webhook, if any,
// through the SSRF-guarded client: {"type": "io.yuxi.evaluation.regressed.v1",
// "data": {…the event…}} with the header X-Yuxi-Delivery (the same on
// every retry). A 4xx answer is final (a failure.Error); a network error or a
// 5xx is returned for the event to be retried.
func (s *Service) NotifyRegression(ctx context.Context, ev events.EvaluationRegressed) error {
	var hook *string
	err := s.pool.QueryRow(ctx, `SELECT webhook_url FROM evaluation_schedules WHERE schedule_id = $1`, ev.ScheduleID).Scan(&hook)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (hook == nil || *hook == "")) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.guard == nil {
		return failure.Unprocessable("outbound_denied", "no outbound client for webhooks")
	}
	body, _ := json.Marshal(map[string]any{"type": events.TypeEvaluationRegressed, "data": ev})
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *hook, bytes.NewReader(body))
	if err != nil {
		return failure.Unprocessable("invalid_webhook_url", "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "yuxi-evaluation")
	req.Header.Set("X-Yuxi-Event", events.TypeEvaluationRegressed)
	req.Header.Set("X-Yuxi-Delivery", "evaluation-regressed:"+ev.RunID)
	resp, err := s.guard.Client().Do(req)
	if errors.Is(err, netguard.ErrDenied) {
		return failure.Unprocessable("outbound_denied", "%v", err)
	}
	if err != nil {
		return fmt.Errorf("regression webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return failure.Unprocessable("webhook_refused", "regression webhook answered %d", resp.StatusCode)
	}
	return fmt.Errorf("regression webhook answered %d", resp.StatusCode)
}

// suiteHistory is History for a suite of sub's (or one of its schedules),
// or, without a suite, for all of sub's suites.
func (s *Service) suiteHistory(ctx context.Context, sub access.Subject, suiteID, scheduleID, metric string) ([]HistoryPoint, error) {
	if suiteID != "" {
		if _, err := s.suite(ctx, sub, suiteID); err != nil {
			return nil, err
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id, suite_id, schedule_id, completed_at, metrics, overall_score, gate_status FROM evaluation_suite_runs
		WHERE status = 'completed' AND created_by = $3 AND ($1 = '' OR suite_id = $1) AND ($2 = '' OR schedule_id = $2)
		ORDER BY completed_at, id`, suiteID, scheduleID, sub.UID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (HistoryPoint, error) {
		var p HistoryPoint
		var metrics map[string]float64
		var overall *float64
		err := r.Scan(&p.RunID, &p.SuiteID, &p.ScheduleID, &p.CompletedAt, &metrics, &overall, &p.GateStatus)
		if v, ok := metricOf(metric, metrics, overall); ok {
			p.Value = &v
		}
		return p, err
	})
}
