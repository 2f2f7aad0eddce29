package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimOutcome says what Claim found.
type ClaimOutcome int

const (
	Claimed   ClaimOutcome = iota // the caller owns the step until the lease expires
	Duplicate                     // the step is already committed: nothing to do
	Busy                          // another live worker holds the lease: nothing to do
	Gone                          // the run is terminal: nothing to do
	NotReady                      // the previous step's tool calls are still running: nothing to do
)

func (o ClaimOutcome) String() string {
	return [...]string{"claimed", "duplicate", "busy", "gone", "not_ready"}[o]
}

// Claim is the result of claiming a step.
type Claim struct {
	Outcome ClaimOutcome
	Run     Run
	// Attempt is the run's attempt counter after the claim; it scopes the
	// worker's writes (only the current attempt may commit).
	Attempt int
	// Retry is true when an earlier attempt already worked on this step (its
	// streamed output must be discarded by clients).
	Retry bool
}

// Claim takes the lease on step stepNo of run id for worker. The pending run
// becomes running. The write is not awaited on disk: losing it in a database
// crash only means the step is claimed again.
func (s *Store) Claim(ctx context.Context, id string, stepNo int, worker string, lease time.Duration) (Claim, error) {
	var c Claim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		r, err := scanRun(tx.QueryRow(ctx, `
			UPDATE agent_runs SET
				status = CASE WHEN status = 'pending' THEN 'running' ELSE status END,
				worker_id = $3, attempt_count = attempt_count + 1,
				lease_expires_at = clock_timestamp() + $4::interval, heartbeat_at = clock_timestamp(),
				started_at = coalesce(started_at, clock_timestamp()), updated_at = clock_timestamp()
			WHERE id = $1 AND status IN ('pending', 'running', 'cancel_requested') AND step_count = $2 - 1
			  AND (worker_id IS NULL OR lease_expires_at IS NULL OR lease_expires_at < clock_timestamp())
			  AND NOT EXISTS (SELECT 1 FROM agent_run_steps WHERE run_id = $1 AND step_no = $2 - 1 AND pending_tools > 0)
			RETURNING `+runCols, id, stepNo, worker, lease.String()))
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err := s.Get(ctx, tx, id)
			if err != nil {
				return err
			}
			c.Run = cur
			switch {
			case IsTerminal(cur.Status):
				c.Outcome = Gone
			case cur.StepCount >= stepNo:
				c.Outcome = Duplicate
			case cur.StepCount < stepNo-1:
				c.Outcome = NotReady
			case cur.WorkerID != nil:
				c.Outcome = Busy
			default:
				c.Outcome = NotReady
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim run %s step %d: %w", id, stepNo, err)
		}
		c.Run, c.Outcome, c.Attempt = r, Claimed, r.AttemptCount
		// Earlier open attempts lost their lease; an earlier attempt on this step means a retry.
		var earlier int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM agent_run_attempts WHERE run_id = $1 AND step_no = $2`, id, stepNo).Scan(&earlier); err != nil {
			return err
		}
		c.Retry = earlier > 0
		if _, err := tx.Exec(ctx, `UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = 'lease_expired'
			WHERE run_id = $1 AND finished_at IS NULL`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO agent_run_attempts (run_id, attempt_no, step_no, worker_id, lease_expires_at)
			VALUES ($1, $2, $3, $4, $5)`, id, r.AttemptCount, stepNo, worker, r.LeaseExpiresAt)
		return err
	})
	return c, err
}

// ErrLeaseLost is returned when the caller no longer owns the run's lease.
var ErrLeaseLost = errors.New("run lease lost")

// Renew extends the lease of the current attempt. ErrLeaseLost when another
// attempt took over or the run ended.
func (s *Store) Renew(ctx context.Context, id, worker string, attempt int, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE agent_runs SET lease_expires_at = clock_timestamp() + $4::interval, heartbeat_at = clock_timestamp()
		WHERE id = $1 AND worker_id = $2 AND attempt_count = $3 AND status IN ('running', 'cancel_requested')`,
		id, worker, attempt, lease.String())
	if err != nil {
		return fmt.Errorf("renew lease of run %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// HasPendingSteer reports whether a steer request waits behind run r.
func (s *Store) HasPendingSteer(ctx context.Context, r Run) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_run_requests
		WHERE uid = $1 AND agent_slug = $2 AND conversation_thread_id = $3 AND status = 'queued' AND queue_policy = 'steer')`,
		r.UID, r.AgentSlug, r.ThreadID).Scan(&ok)
	return ok, err
}

// Release gives up the caller's lease (after an infrastructure error) so a
// retried delivery can claim the step at once.
func (s *Store) Release(ctx context.Context, id string, o Owner) error {
	_, err := s.pool.Exec(ctx, `UPDATE agent_runs SET worker_id = NULL, lease_expires_at = NULL
		WHERE id = $1 AND worker_id = $2 AND attempt_count = $3 AND status IN ('running', 'cancel_requested')`, id, o.Worker, o.Attempt)
	return err
}
