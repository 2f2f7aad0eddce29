// Package budget is per-user and per-agent token budgets, checked before
// each model call. It owns the tables token_budgets and
// token_budget_reservations.
//
// A model call is admitted by Reserve and charged by Settle. Admission is
// one transaction holding the budget rows' locks: a budget with nothing
// left refuses (Exhausted); otherwise the call reserves the largest call
// seen on that budget (or, before any call was seen, all that is left) and
// is admitted when that fits beside the other unsettled reservations — or
// when it is the only call in flight. A call that would not fit while others
// are in flight waits (Busy) for them to settle. So concurrent runs
// overspend a budget by at most one call (the one admitted alone into the
// remainder), provided no call is larger than every call before it.
// Reservations carry a lease: a crashed step's reservation expires. Every
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
	pool  *pgxpool.Pool
	lease time.Duration
}

// New returns the service; lease bounds how long an unsettled reservation
// counts (0: 10 minutes).
func New(pool *pgxpool.Pool, lease time.Duration) *Service {
	if lease <= 0 {
		lease = 10 * time.Minute
	}
	return &Service{pool: pool, lease: lease}
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

// Reserve admits c, estimate being its approximate input size in tokens.
// With no budget for c's user or agent it answers Unlimited after one read
// (the common case costs one round trip). A repeated Reserve of the same
// call replaces its reservation.
func (s *Service) Reserve(ctx context.Context, c Call, estimate int64) (Decision, *Refusal, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM token_budgets
		WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2))`, c.UID, c.Agent).Scan(&exists); err != nil {
		return Admitted, nil, err
	}
	if !exists {
		return Unlimited, nil, nil
	}
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
		rows, err := tx.Query(ctx, `SELECT b.scope, b.subject, b.limit_tokens, `+usedSQL+`, b.max_call_tokens,
				coalesce((SELECT sum(r.tokens) FROM token_budget_reservations r WHERE r.scope = b.scope AND r.subject = b.subject
					AND r.expires_at > now() AND NOT (r.run_id = $3 AND r.step_no = $4 AND r.attempt = $5 AND r.call_no = $6)), 0)
			FROM token_budgets b
			WHERE (b.scope = 'user' AND b.subject = $1) OR (b.scope = 'agent' AND b.subject = $2)
			ORDER BY b.scope, b.subject`, c.UID, c.Agent, c.RunID, c.StepNo, c.Attempt, c.CallNo)
		if err != nil {
			return err
		}
		type hold struct {
			scope, subject string
			tokens         int64
		}
		var holds []hold
		for rows.Next() {
			var scope, subject string
			var limit, used, maxCall, reserved int64
			if err := rows.Scan(&scope, &subject, &limit, &used, &maxCall, &reserved); err != nil {
				rows.Close()
				return err
			}
			left := limit - used
			if left <= 0 {
				dec, ref = Exhausted, &Refusal{Scope: scope, Subject: subject, Limit: limit, Used: used}
				continue
			}
			est := max(maxCall, estimate, 1)
			if maxCall == 0 {
				est = max(left, 1) // no call seen yet: its size is unknown, so it goes alone
			}
			if reserved > 0 && reserved+est > left && dec != Exhausted {
				dec = Busy
			}
			holds = append(holds, hold{scope, subject, est})
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
				ON CONFLICT (run_id, step_no, attempt, call_no, scope, subject) DO UPDATE SET tokens = EXCLUDED.tokens, expires_at = EXCLUDED.expires_at`,
				c.RunID, c.StepNo, c.Attempt, h.scope, h.subject, h.tokens, s.lease.Seconds(), c.CallNo); err != nil {
				return err
			}
		}
		return nil
	})
	return dec, ref, err
}

// Settle charges c's tokens to its user's and agent's budgets and drops
// its reservation, in one transaction (used 0: the call consumed nothing).
func (s *Service) Settle(ctx context.Context, c Call, used int64) error {
	return postgres.Tx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM token_budget_reservations WHERE run_id = $1 AND step_no = $2 AND attempt = $3 AND call_no = $4`,
			c.RunID, c.StepNo, c.Attempt, c.CallNo); err != nil {
			return err
		}
		if used <= 0 {
			return nil
		}
		// The rows in Reserve's order, so that the two never deadlock.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM token_budgets WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2)
			ORDER BY scope, subject FOR UPDATE`, c.UID, c.Agent); err != nil {
			return err
		}
		// A charge in a new window starts it (the old window's use is dropped).
		_, err := tx.Exec(ctx, `UPDATE token_budgets SET used_tokens = `+usedSQL+` + $3, max_call_tokens = greatest(max_call_tokens, $3),
			period_start = token_budget_window(period, period_start)
			WHERE (scope = 'user' AND subject = $1) OR (scope = 'agent' AND subject = $2)`, c.UID, c.Agent, used)
		return err
	})
}
