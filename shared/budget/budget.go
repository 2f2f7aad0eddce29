// Package budget is per-user and per-agent token budgets, checked before
// each model call. It owns the tables token_budgets and
// token_budget_reservations.
//
// A model call is admitted by Reserve and charged by Settle. A call
// reserves its own bound: its estimated input plus the output cap it is
// sent with (max_tokens = MaxOutput), or the configured per-call ceiling
// when larger. Admission is one transaction holding the budget rows' locks:
// a budget with nothing left refuses (Exhausted); otherwise the call is
// admitted when its reservation fits beside the other unsettled
// reservations — or when it is the only call in flight. A call that would
// not fit while others are in flight waits (Busy) for them to settle.
//
// The bound: while every call costs at most its reservation, a budget's
// use never passes limit − 1 + R, R being the largest reservation of a call
// admitted alone — calls admitted beside others fit in what is left, and
// while a call admitted alone into a smaller remainder is in flight nothing
// else is admitted. A call costs at most its reservation when the provider
// honours max_tokens and counts no more input than estimated; a Ceiling of
// at least the model's context window makes that hold whatever the
// estimate (the provider refuses longer calls), at the price of admitting
// one call at a time on budgets smaller than two ceilings.
//
// Settling is durable: a reservation stays until Settle drops it. One whose
// lease ends unsettled (a crash between the call and Settle, or a failed
// Settle) is charged at its reserved amount by the next admission on its
// budget or by Sweep, and a late Settle then charges the difference. Every
// model call is admitted on its own — the context summary of a step and
// each try of its turn (a retried model call is admitted again) — and
// counted.
//
// A budget covers its lifetime (from when it was set or reset) or renews
// every UTC day or month (Period): once its window has passed its use reads
// as 0, and the next charge starts the new window (SQL function
// token_budget_window, migration 0076).
//
// Imported by: functions/agent-step/agentstep (types of its consumer
// interface), functions/intake/intake, shared/bootstrap/chat, tests.
// May import: shared/failure, shared/postgres, pgx.
package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// Scopes.
const (
	ScopeUser  = "user"
	ScopeAgent = "agent"
)

// ErrorType is the run's error_type when a budget refuses a model call.
const ErrorType = "budget_exhausted"

// Periods.
const (
	PeriodLifetime = "lifetime"
	PeriodDaily    = "daily"
	PeriodMonthly  = "monthly"
)

// Budget is one budget as the admin API shows it.
type Budget struct {
	Scope           string `json:"scope"`
	Subject         string `json:"subject"`
	LimitTokens     int64  `json:"limit_tokens"`
	UsedTokens      int64  `json:"used_tokens"` // in the current window
	RemainingTokens int64  `json:"remaining_tokens"`
	Period          string `json:"period"`
	// WindowStart is when the current window began (a lifetime budget's:
	// when it was set or reset); ResetsAt when the next begins (null for
	// a lifetime budget).
	WindowStart time.Time  `json:"window_start"`
	ResetsAt    *time.Time `json:"resets_at"`
	UpdatedBy   string     `json:"updated_by"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Service is the budgets store.
type Service struct {
	pool   *pgxpool.Pool
	lease  time.Duration
	limits Limits
}

// Limits size a call's reservation.
type Limits struct {
	// MaxOutput is the output cap (max_tokens) of a call under a budget
	// (0: DefaultMaxOutput).
	MaxOutput int64
	// Ceiling, when set, is the least a call reserves: set it to the
	// largest context window of the models in use and a call can never
	// cost more than it reserved, whatever the estimate of its input.
	Ceiling int64
}

// DefaultMaxOutput is the output cap of a call under a budget when none is
// configured.
const DefaultMaxOutput = 8192

// New returns the service; lease bounds how long an unsettled reservation
// holds before it is charged at its reserved amount (0: 10 minutes).
func New(pool *pgxpool.Pool, lease time.Duration) *Service {
	if lease <= 0 {
		lease = 10 * time.Minute
	}
	return &Service{pool: pool, lease: lease, limits: Limits{MaxOutput: DefaultMaxOutput}}
}

// WithLimits sets how calls are sized (zero fields keep their defaults).
func (s *Service) WithLimits(l Limits) *Service {
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	s.limits = Limits{MaxOutput: l.MaxOutput, Ceiling: max(l.Ceiling, 0)}
	return s
}

// usedSQL is a budget row's use in its current window.
const usedSQL = `(CASE WHEN period_start < token_budget_window(period, period_start) THEN 0 ELSE used_tokens END)`

const cols = `scope, subject, limit_tokens, ` + usedSQL + `, greatest(limit_tokens - ` + usedSQL + `, 0), period,
	token_budget_window(period, period_start),
	CASE period WHEN 'daily' THEN token_budget_window(period, period_start) + interval '1 day'
		WHEN 'monthly' THEN token_budget_window(period, period_start) + interval '1 month' END,
	updated_by, updated_at`

func scan(row pgx.Row) (Budget, error) {
	var b Budget
	err := row.Scan(&b.Scope, &b.Subject, &b.LimitTokens, &b.UsedTokens, &b.RemainingTokens, &b.Period, &b.WindowStart, &b.ResetsAt,
		&b.UpdatedBy, &b.UpdatedAt)
	return b, err
}

// List returns every budget.
func (s *Service) List(ctx context.Context) ([]Budget, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+cols+` FROM token_budgets ORDER BY scope, subject`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Budget{}
	for rows.Next() {
		b, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Get returns one budget (nil: none).
func (s *Service) Get(ctx context.Context, scope, subject string) (*Budget, error) {
	b, err := scan(s.pool.QueryRow(ctx, `SELECT `+cols+` FROM token_budgets WHERE scope = $1 AND subject = $2`, scope, subject))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// Update is PUT /api/system/token-budgets: LimitTokens nil removes the
// budget; Reset zeroes what was used; Period (lifetime when a new budget
// leaves it out; unchanged otherwise) — changing it starts a new window
// with nothing used.
type Update struct {
	Scope       string  `json:"scope"`
	Subject     string  `json:"subject"`
	LimitTokens *int64  `json:"limit_tokens"`
	Reset       bool    `json:"reset"`
	Period      *string `json:"period"`
}

// Set applies u (by is the admin's uid); nil when the budget was removed.
func (s *Service) Set(ctx context.Context, by string, u Update) (*Budget, error) {
	if u.Scope != ScopeUser && u.Scope != ScopeAgent {
		return nil, failure.Unprocessable("invalid_budget_scope", "scope must be %q or %q", ScopeUser, ScopeAgent)
	}
	if u.Subject == "" || len(u.Subject) > 256 {
		return nil, failure.Unprocessable("invalid_budget_subject", "subject (a user's uid or an agent's slug) is required")
	}
	if u.LimitTokens == nil {
		_, err := s.pool.Exec(ctx, `DELETE FROM token_budgets WHERE scope = $1 AND subject = $2`, u.Scope, u.Subject)
		return nil, err
	}
	if *u.LimitTokens < 0 {
		return nil, failure.Unprocessable("invalid_budget_limit", "limit_tokens must be 0 or more")
	}
	if u.Period != nil && *u.Period != PeriodLifetime && *u.Period != PeriodDaily && *u.Period != PeriodMonthly {
		return nil, failure.Unprocessable("invalid_budget_period", "period must be %q, %q or %q", PeriodLifetime, PeriodDaily, PeriodMonthly)
	}
	// A reset or a new period starts a window with nothing used; a lifetime
	// window starts now.
	b, err := scan(s.pool.QueryRow(ctx, `INSERT INTO token_budgets AS b (scope, subject, limit_tokens, updated_by, period, period_start)
		VALUES ($1, $2, $3, $4, coalesce($6, 'lifetime'), token_budget_window(coalesce($6, 'lifetime'), now()))
		ON CONFLICT (scope, subject) DO UPDATE SET limit_tokens = EXCLUDED.limit_tokens, updated_by = EXCLUDED.updated_by,
			updated_at = now(), period = coalesce($6, b.period),
			used_tokens = CASE WHEN $5 OR coalesce($6, b.period) <> b.period THEN 0 ELSE b.used_tokens END,
			period_start = CASE WHEN $5 OR coalesce($6, b.period) <> b.period THEN token_budget_window(coalesce($6, b.period), now())
				ELSE b.period_start END
		RETURNING `+cols, u.Scope, u.Subject, *u.LimitTokens, by, u.Reset, u.Period))
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// Call identifies one model call: a run's step attempt and the call's
// number in it.
type Call struct {
	RunID   string
	StepNo  int
	Attempt int
	// CallNo numbers the model calls of one step attempt: CallSummary for
	// the context summary, CallTurn + n for the turn's n-th retry.
	CallNo int
	UID    string // the run's user (the user budget)
	Agent  string // the run's agent slug (the agent budget)
}

// Call numbers.
const (
	CallSummary = 0
	CallTurn    = 1
)

// Decision is Reserve's answer.
type Decision int

// Decisions.
const (
	Admitted  Decision = iota // the call may go ahead (reserved where a budget applies)
	Busy                      // other calls in flight hold what is left: try again shortly
	Exhausted                 // a budget has nothing left: the run fails
	Unlimited                 // no budget applies: the call goes ahead and needs no Settle
)

// Refusal names the budget that refused.
type Refusal struct {
	Scope, Subject string
	Limit, Used    int64
}

func (r Refusal) Error() string {
	return fmt.Sprintf("the %s token budget of %q is exhausted (%d of %d tokens used)", r.Scope, r.Subject, r.Used, r.Limit)
}

// Reservation is the number of tokens a call reserves: its estimated input
// plus the output cap it is sent with (MaxOutput), or the per-call ceiling
// when that is larger.
func (s *Service) Reservation(estimate int64) int64 {
	return max(max(estimate, 0)+s.limits.MaxOutput, s.limits.Ceiling, 1)
}

// MaxOutput is the output cap (max_tokens) a call under a budget is sent
// with, so that the provider stops it within its reservation.
func (s *Service) MaxOutput() int64 { return s.limits.MaxOutput }

// Reserve admits c, estimate being its approximate input size in tokens; an
// admitted call must be sent with max_tokens = MaxOutput. With no budget
// for c's user or agent it answers Unlimited after one read (the common
// case costs one round trip). A repeated Reserve of the same call replaces
// its reservation. Reservations of the budgets whose lease ended unsettled
// are charged first (chargeStale).
func (s *Service) Reserve(ctx context.Context, c Call, estimate int64) (Decision, *Refusal, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM token_budgets
		WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2))`, c.UID, c.Agent).Scan(&exists); err != nil {
		return Admitted, nil, err
	}
	if !exists {
		return Unlimited, nil, nil
	}
	want := s.Reservation(estimate)
	var dec Decision
	var ref *Refusal
	err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		dec, ref = Admitted, nil
		// Lock the budget rows first; the reservations are read by a later
		// statement, whose snapshot (READ COMMITTED) is taken after the locks
		// are held and so sees every reservation committed before them.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM token_budgets
			WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2)
			ORDER BY scope, subject FOR UPDATE`, c.UID, c.Agent); err != nil {
			return err
		}
		if err := chargeStale(ctx, tx, `(r.scope = 'user' AND r.subject = $1) OR (r.scope = 'agent' AND r.subject = $2)`, c.UID, c.Agent); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT b.scope, b.subject, b.limit_tokens, `+usedSQL+`,
				coalesce((SELECT sum(r.tokens) FROM token_budget_reservations r WHERE r.scope = b.scope AND r.subject = b.subject
					AND r.charged_at IS NULL AND NOT (r.run_id = $3 AND r.step_no = $4 AND r.attempt = $5 AND r.call_no = $6)), 0)
			FROM token_budgets b
			WHERE (b.scope = 'user' AND b.subject = $1) OR (b.scope = 'agent' AND b.subject = $2)
			ORDER BY b.scope, b.subject`, c.UID, c.Agent, c.RunID, c.StepNo, c.Attempt, c.CallNo)
		if err != nil {
			return err
		}
		var holds [][2]string
		for rows.Next() {
			var scope, subject string
			var limit, used, reserved int64
			if err := rows.Scan(&scope, &subject, &limit, &used, &reserved); err != nil {
				rows.Close()
				return err
			}
			left := limit - used
			if left <= 0 {
				dec, ref = Exhausted, &Refusal{Scope: scope, Subject: subject, Limit: limit, Used: used}
				continue
			}
			// It fits beside the calls in flight, or it goes alone: the one
			// call that may overspend, by less than its reservation.
			if reserved > 0 && reserved+want > left && dec != Exhausted {
				dec = Busy
			}
			holds = append(holds, [2]string{scope, subject})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if dec != Admitted || len(holds) == 0 {
			return nil
		}
		for _, h := range holds {
			if _, err := tx.Exec(ctx, `INSERT INTO token_budget_reservations (run_id, step_no, attempt, call_no, scope, subject, tokens, expires_at)
				VALUES ($1, $2, $3, $8, $4, $5, $6, now() + make_interval(secs => $7))
				ON CONFLICT (run_id, step_no, attempt, call_no, scope, subject) DO UPDATE
				SET tokens = EXCLUDED.tokens, expires_at = EXCLUDED.expires_at, charged_at = NULL`,
				c.RunID, c.StepNo, c.Attempt, h[0], h[1], want, s.lease.Seconds(), c.CallNo); err != nil {
				return err
			}
		}
		return nil
	})
	return dec, ref, err
}

// chargeStale charges, at their reserved amount, the reservations matching
// where (over r, with args) whose lease ended unsettled, and keeps them
// marked charged so that a late Settle charges only the difference; marked
// rows older than a day are dropped. The caller holds the budget rows'
// locks (or, in Sweep, takes them here in Reserve's order).
func chargeStale(ctx context.Context, tx pgx.Tx, where string, args ...any) error {
	_, err := tx.Exec(ctx, `WITH stale AS (
			UPDATE token_budget_reservations r SET charged_at = now()
			WHERE (`+where+`) AND r.charged_at IS NULL AND r.expires_at <= now()
			RETURNING r.scope, r.subject, r.tokens),
		per AS (SELECT scope, subject, sum(tokens) AS tokens FROM stale GROUP BY scope, subject)
		UPDATE token_budgets b SET used_tokens = `+usedSQL+` + per.tokens, period_start = token_budget_window(b.period, b.period_start)
		FROM per WHERE b.scope = per.scope AND b.subject = per.subject`, args...)
	if err != nil {
		return fmt.Errorf("charge stale reservations: %w", err)
	}
	_, err = tx.Exec(ctx, `DELETE FROM token_budget_reservations r WHERE (`+where+`) AND r.charged_at < now() - interval '1 day'`, args...)
	return err
}

// Sweep charges every reservation whose lease ended unsettled (see
// chargeStale), budget by budget; the dispatcher's recovery sweep calls it
// so that a crashed call is charged even when no later call comes. It
// returns how many budgets it touched.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT scope, subject FROM token_budget_reservations
		WHERE charged_at IS NULL AND expires_at <= now() ORDER BY scope, subject`)
	if err != nil {
		return 0, err
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var k [2]string
		return k, r.Scan(&k[0], &k[1])
	})
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM token_budgets WHERE scope = $1 AND subject = $2 FOR UPDATE`, k[0], k[1]); err != nil {
				return err
			}
			return chargeStale(ctx, tx, `r.scope = $1 AND r.subject = $2`, k[0], k[1])
		}); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// Settle charges c's tokens to its user's and agent's budgets and drops
// its reservation, in one transaction (used 0: the call consumed nothing).
// A reservation already charged as stale is charged only the difference;
// one already settled (or never made) is not charged again, so Settle may
// be retried.
func (s *Service) Settle(ctx context.Context, c Call, used int64) error {
	used = max(used, 0)
	return postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		// The budget rows first, in Reserve's order, so that Settle never
		// deadlocks with an admission charging this call as stale.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM token_budgets WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2)
			ORDER BY scope, subject FOR UPDATE`, c.UID, c.Agent); err != nil {
			return err
		}
		// Each reservation row charges its own budget: used, less what a
		// stale charge already counted. A budget set after the call was
		// admitted has no row and is not charged.
		_, err := tx.Exec(ctx, `WITH done AS (
				DELETE FROM token_budget_reservations WHERE run_id = $1 AND step_no = $2 AND attempt = $3 AND call_no = $4
				RETURNING scope, subject, CASE WHEN charged_at IS NULL THEN $5::bigint ELSE $5::bigint - tokens END AS delta)
			UPDATE token_budgets b SET used_tokens = greatest(`+usedSQL+` + done.delta, 0),
				period_start = token_budget_window(b.period, b.period_start)
			FROM done WHERE b.scope = done.scope AND b.subject = done.subject AND done.delta <> 0`,
			c.RunID, c.StepNo, c.Attempt, c.CallNo, used)
		return err
	})
}
