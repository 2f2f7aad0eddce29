package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/invoke"
)

// Agent evaluation suites: an agent slug, items (input, optional expected
// output, checks), a concurrency and a per-item timeout. A suite is its
// creator's: only they read, change and run it (the runs use their access
// to the agent). Its items are stored inline, or read from a Langfuse
// dataset when a run starts (langfuse_dataset, with LANGFUSE_* configured).

// Errors of suites.
var (
	ErrSuiteNotFound    = failure.NotFound("suite_not_found", "evaluation suite not found")
	ErrSuiteRunNotFound = failure.NotFound("suite_run_not_found", "evaluation suite run not found")
)

// Agents runs evaluation samples through the normal run path (invoke.Service).
type Agents interface {
	// EvalRun runs one sample and blocks until its run ends (or the
	// platform's YUXI_SYNC_WAIT passes: invoke.ErrWaitTimeout).
	EvalRun(ctx context.Context, sub access.Subject, in invoke.EvalInput) (invoke.EvalResult, error)
	// CheckAgent answers 404 for an agent sub may not use.
	CheckAgent(ctx context.Context, sub access.Subject, slug string) error
}

// WithAgents returns a copy of the service that runs agent samples with a.
func (s *Service) WithAgents(a Agents) *Service {
	c := *s
	c.agents = a
	return &c
}

// Check is one check of an item's output: contains (value, case_sensitive),
// regex (pattern), json_schema (schema: the output must be JSON valid
// against it) or judge (prompt: a criterion the suite's judge model scores
// 0–1; threshold, default 0.5, is the pass mark).
type Check struct {
	Type          string          `json:"type"`
	Value         string          `json:"value,omitempty"`
	CaseSensitive bool            `json:"case_sensitive,omitempty"`
	Pattern       string          `json:"pattern,omitempty"`
	Schema        json.RawMessage `json:"schema,omitempty"`
	Prompt        string          `json:"prompt,omitempty"`
	Threshold     *float64        `json:"threshold,omitempty"`
}

// SuiteItem is one task of a suite.
type SuiteItem struct {
	Input          string  `json:"input"`
	ExpectedOutput *string `json:"expected_output,omitempty"`
	Checks         []Check `json:"checks,omitempty"`
	// LangfuseItemID is the dataset item an item was read from.
	LangfuseItemID string `json:"langfuse_item_id,omitempty"`
}

// Suite is an agent evaluation suite. Checks apply to every item besides
// its own (the way to check a Langfuse dataset's items).
type Suite struct {
	SuiteID         string      `json:"suite_id"`
	Name            string      `json:"name"`
	Description     string      `json:"description"`
	AgentSlug       string      `json:"agent_slug"`
	Items           []SuiteItem `json:"items"`
	Checks          []Check     `json:"checks"`
	LangfuseDataset *string     `json:"langfuse_dataset"`
	Concurrency     int         `json:"concurrency"`
	TimeoutSeconds  int         `json:"timeout_seconds"`
	ModelSpec       string      `json:"model_spec"`
	JudgeLLM        string      `json:"judge_llm"`
	CreatedBy       string      `json:"created_by"`
	CreatedAt       time.Time   `json:"created_at"`
	UpdatedAt       time.Time   `json:"updated_at"`
}

// SuiteInput creates or changes a suite (absent fields keep their value on change).
type SuiteInput struct {
	Name            *string      `json:"name"`
	Description     *string      `json:"description"`
	AgentSlug       *string      `json:"agent_slug"`
	Items           *[]SuiteItem `json:"items"`
	Checks          *[]Check     `json:"checks"`
	LangfuseDataset *string      `json:"langfuse_dataset"`
	Concurrency     *int         `json:"concurrency"`
	TimeoutSeconds  *int         `json:"timeout_seconds"`
	ModelSpec       *string      `json:"model_spec"`
	JudgeLLM        *string      `json:"judge_llm"`
}

// Limits of a suite.
const (
	MaxSuiteItems     = 1000
	MaxSuiteItemBytes = 64 << 10
)

const suiteCols = `suite_id, name, description, agent_slug, items, checks, langfuse_dataset, concurrency, timeout_seconds, model_spec, judge_llm,
	created_by, created_at, updated_at`

func scanSuite(row pgx.Row) (Suite, error) {
	var s Suite
	err := row.Scan(&s.SuiteID, &s.Name, &s.Description, &s.AgentSlug, &s.Items, &s.Checks, &s.LangfuseDataset, &s.Concurrency, &s.TimeoutSeconds,
		&s.ModelSpec, &s.JudgeLLM, &s.CreatedBy, &s.CreatedAt, &s.UpdatedAt)
	if s.Items == nil {
		s.Items = []SuiteItem{}
	}
	if s.Checks == nil {
		s.Checks = []Check{}
	}
	return s, err
}

func applySuite(s *Suite, in SuiteInput) {
	if in.Name != nil {
		s.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		s.Description = *in.Description
	}
	if in.AgentSlug != nil {
		s.AgentSlug = strings.TrimSpace(*in.AgentSlug)
	}
	if in.Items != nil {
		s.Items = *in.Items
	}
	if in.Checks != nil {
		s.Checks = *in.Checks
	}
	if in.LangfuseDataset != nil {
		if d := strings.TrimSpace(*in.LangfuseDataset); d != "" {
			s.LangfuseDataset = &d
		} else {
			s.LangfuseDataset = nil
		}
	}
	if in.Concurrency != nil {
		s.Concurrency = *in.Concurrency
	}
	if in.TimeoutSeconds != nil {
		s.TimeoutSeconds = *in.TimeoutSeconds
	}
	if in.ModelSpec != nil {
		s.ModelSpec = strings.TrimSpace(*in.ModelSpec)
	}
	if in.JudgeLLM != nil {
		s.JudgeLLM = strings.TrimSpace(*in.JudgeLLM)
	}
}

// validateSuite checks a suite as a run would use it: sub may use the
// agent, the items (or the Langfuse dataset) and their checks are sound,
// the limits are in range and a judge check has a judge model.
func (s *Service) validateSuite(ctx context.Context, sub access.Subject, su *Suite) error {
	switch {
	case su.Name == "" || utf8.RuneCountInString(su.Name) > 200:
		return failure.Invalid("invalid_name", "name is required (at most 200 characters)")
	case su.AgentSlug == "":
		return failure.Invalid("missing_agent_slug", "agent_slug is required")
	case su.Concurrency < 1 || su.Concurrency > 32:
		return failure.Invalid("invalid_concurrency", "concurrency must be between 1 and 32")
	case su.TimeoutSeconds < 1 || su.TimeoutSeconds > 3600:
		return failure.Invalid("invalid_timeout", "timeout_seconds must be between 1 and 3600")
	case len(su.Items) > MaxSuiteItems:
		return failure.Invalid("too_many_items", "a suite has at most %d items", MaxSuiteItems)
	case len(su.Items) == 0 && su.LangfuseDataset == nil:
		return failure.Invalid("empty_suite", "a suite needs items or a langfuse_dataset")
	case su.LangfuseDataset != nil && s.langfuse == nil:
		return failure.Invalid("langfuse_unconfigured", "langfuse_dataset needs LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and LANGFUSE_BASE_URL on the server")
	}
	if s.agents == nil {
		return failure.New(failure.KindUnavailable, "agent_evaluation_unavailable", "agent evaluation is not configured on this server")
	}
	judged := false
	for j, c := range su.Checks {
		if err := c.validate(); err != nil {
			return failure.Invalid("invalid_check", "suite check %d: %v", j, err)
		}
		judged = judged || c.Type == CheckJudge
	}
	for i := range su.Items {
		it := &su.Items[i]
		if strings.TrimSpace(it.Input) == "" {
			return failure.Invalid("invalid_items", "item %d: input is required", i)
		}
		if b, _ := json.Marshal(it); len(b) > MaxSuiteItemBytes {
			return failure.Invalid("invalid_items", "item %d is larger than %d bytes", i, MaxSuiteItemBytes)
		}
		for j, c := range it.Checks {
			if err := c.validate(); err != nil {
				return failure.Invalid("invalid_check", "item %d, check %d: %v", i, j, err)
			}
			judged = judged || c.Type == CheckJudge
		}
	}
	if judged && su.JudgeLLM == "" {
		return failure.Invalid("missing_judge_llm", "a judge check needs the suite's judge_llm (provider:model)")
	}
	if su.JudgeLLM != "" && s.models != nil {
		if _, _, err := s.models.ChatModel(su.JudgeLLM); err != nil {
			return failure.Unprocessable("invalid_judge_llm", "judge_llm %s: %v", su.JudgeLLM, err)
		}
	}
	return s.agents.CheckAgent(ctx, sub, su.AgentSlug)
}

// CreateSuite adds a suite of sub's.
func (s *Service) CreateSuite(ctx context.Context, sub access.Subject, in SuiteInput) (Suite, error) {
	su := Suite{Concurrency: 4, TimeoutSeconds: 300, Items: []SuiteItem{}, Checks: []Check{}}
	applySuite(&su, in)
	if err := s.validateSuite(ctx, sub, &su); err != nil {
		return Suite{}, err
	}
	items, _ := json.Marshal(su.Items)
	checks, _ := json.Marshal(su.Checks)
	return scanSuite(s.pool.QueryRow(ctx, `INSERT INTO evaluation_suites (suite_id, name, description, agent_slug, items, checks, langfuse_dataset,
		concurrency, timeout_seconds, model_spec, judge_llm, created_by) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) RETURNING `+suiteCols,
		newID("suite_", 6), su.Name, su.Description, su.AgentSlug, items, checks, su.LangfuseDataset, su.Concurrency, su.TimeoutSeconds,
		su.ModelSpec, su.JudgeLLM, sub.UID))
}

var suiteIDPattern = regexp.MustCompile(`^suite_[a-f0-9]{12}$`)

// suite loads suite id of sub (another user's suite is not found).
func (s *Service) suite(ctx context.Context, sub access.Subject, id string) (Suite, error) {
	if !suiteIDPattern.MatchString(id) {
		return Suite{}, ErrSuiteNotFound
	}
	su, err := scanSuite(s.pool.QueryRow(ctx, `SELECT `+suiteCols+` FROM evaluation_suites WHERE suite_id = $1 AND created_by = $2`, id, sub.UID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Suite{}, ErrSuiteNotFound
	}
	return su, err
}

// GetSuite returns a suite of sub's.
func (s *Service) GetSuite(ctx context.Context, sub access.Subject, id string) (Suite, error) {
	return s.suite(ctx, sub, id)
}

// Suites lists sub's suites, newest first.
func (s *Service) Suites(ctx context.Context, sub access.Subject) ([]Suite, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+suiteCols+` FROM evaluation_suites WHERE created_by = $1 ORDER BY created_at DESC, id DESC`, sub.UID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Suite, error) { return scanSuite(r) })
}

// UpdateSuite changes a suite of sub's (runs already started keep their items).
func (s *Service) UpdateSuite(ctx context.Context, sub access.Subject, id string, in SuiteInput) (Suite, error) {
	su, err := s.suite(ctx, sub, id)
	if err != nil {
		return Suite{}, err
	}
	applySuite(&su, in)
	if err := s.validateSuite(ctx, sub, &su); err != nil {
		return Suite{}, err
	}
	items, _ := json.Marshal(su.Items)
	checks, _ := json.Marshal(su.Checks)
	return scanSuite(s.pool.QueryRow(ctx, `UPDATE evaluation_suites SET name = $2, description = $3, agent_slug = $4, items = $5,
		langfuse_dataset = $6, concurrency = $7, timeout_seconds = $8, model_spec = $9, judge_llm = $10, checks = $11, updated_at = now()
		WHERE suite_id = $1 RETURNING `+suiteCols,
		id, su.Name, su.Description, su.AgentSlug, items, su.LangfuseDataset, su.Concurrency, su.TimeoutSeconds, su.ModelSpec, su.JudgeLLM, checks))
}

// DeleteSuite deletes a suite of sub's with its runs and schedules.
func (s *Service) DeleteSuite(ctx context.Context, sub access.Subject, id string) error {
	if _, err := s.suite(ctx, sub, id); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM evaluation_suites WHERE suite_id = $1`, id)
	return err
}

// subjectOf is the access subject of uid now (a suite runs as its creator,
// with their current role; a deleted user's suite cannot run).
func (s *Service) subjectOf(ctx context.Context, uid string) (access.Subject, error) {
	sub := access.Subject{UID: uid}
	err := s.pool.QueryRow(ctx, `SELECT role, department_id FROM users WHERE uid = $1 AND NOT is_deleted`, uid).Scan(&sub.Role, &sub.DepartmentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, failure.Unprocessable("suite_owner_gone", "the suite's owner no longer exists")
	}
	return sub, err
}
