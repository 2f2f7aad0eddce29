package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
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
	// Steer is true when a steer request waits behind the run: the step must
	// end the run at this model boundary.
	Steer bool
	// Transcript is the thread's transcript, read with the claim (same round trip).
	Transcript []Entry
}

// claimSQL takes the lease, opens an attempt (closing stale ones) and reports
// earlier attempts on the step and a waiting steer request, in one statement.
// The commit is not awaited on disk (set_config(…, true) lasts for this
// statement's transaction): losing a claim in a database crash only means the
// step is claimed again.
var claimSQL = `
	WITH cfg AS (SELECT set_config('synchronous_commit', 'off', true)),
	claimed AS (
		UPDATE agent_runs SET
			status = CASE WHEN status = 'pending' THEN 'running' ELSE status END,
			worker_id = $3, attempt_count = attempt_count + 1,
			lease_expires_at = clock_timestamp() + $4::interval, heartbeat_at = clock_timestamp(),
			started_at = coalesce(started_at, clock_timestamp()), updated_at = clock_timestamp()
		WHERE id = $1 AND status IN ('pending', 'running', 'cancel_requested') AND step_count = $2 - 1
		  AND (worker_id IS NULL OR lease_expires_at IS NULL OR lease_expires_at < clock_timestamp())
		  AND NOT EXISTS (SELECT 1 FROM agent_run_steps WHERE run_id = $1 AND step_no = $2 - 1 AND pending_tools > 0)
		RETURNING *),
	closed AS (
		UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = 'lease_expired'
		WHERE run_id = $1 AND finished_at IS NULL AND EXISTS (SELECT 1 FROM claimed) RETURNING 1),
	opened AS (
		INSERT INTO agent_run_attempts (run_id, attempt_no, step_no, worker_id, lease_expires_at)
		SELECT id, attempt_count, $2, $3, lease_expires_at FROM claimed RETURNING 1)
	SELECT ` + prefixed("claimed", runCols) + `,
		(SELECT count(*) FROM agent_run_attempts WHERE run_id = $1 AND step_no = $2) > 0,
		EXISTS (SELECT 1 FROM agent_run_requests q WHERE q.uid = claimed.uid AND q.agent_slug = claimed.agent_slug
			AND q.conversation_thread_id = claimed.conversation_thread_id AND q.status = 'queued' AND q.queue_policy = 'steer')
	FROM claimed, cfg`

// Claim takes the lease on step stepNo of run id for worker. The pending run
// becomes running.
func (s *Store) Claim(ctx context.Context, id string, stepNo int, worker string, lease time.Duration) (c Claim, err error) {
	ctx, span := telemetry.StartStore(ctx, "run.claim")
	defer func() { span.End(err) }()
	return s.claim(ctx, id, stepNo, worker, lease)
}

// claim is Claim inside its store span.

func (s *Store) claim(ctx context.Context, id string, stepNo int, worker string, lease time.Duration) (Claim, error) {
	var c Claim
	var extra [2]bool
	var r Run
	var claimErr, transcriptErr error
	// The claim and the transcript travel in one pipelined round trip; the
	// transcript is wasted when the claim fails, which is the rare case.
	b := &pgx.Batch{}
	b.Queue(claimSQL, id, stepNo, worker, lease.String()).QueryRow(func(row pgx.Row) error {
		r, claimErr = scanRunWith(row, &extra[0], &extra[1])
		return nil
	})
	b.Queue(transcriptSQL("(SELECT conversation_id FROM agent_runs WHERE id = $1)"), id).Query(func(rows pgx.Rows) error {
		c.Transcript, transcriptErr = scanTranscript(rows)
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return c, fmt.Errorf("claim run %s step %d: %w", id, stepNo, err)
	}
	err := claimErr
	if err == nil && transcriptErr != nil {
		err = transcriptErr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		c.Transcript = nil
		cur, err := s.Get(ctx, id)
		if err != nil {
			return c, err
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
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("claim run %s step %d: %w", id, stepNo, err)
	}
	c.Run, c.Outcome, c.Attempt, c.Retry, c.Steer = r, Claimed, r.AttemptCount, extra[0], extra[1]
	return c, nil
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

// Release gives up the caller's lease (after an infrastructure error) so a
// retried delivery can claim the step at once.
func (s *Store) Release(ctx context.Context, id string, o Owner) error {
	_, err := s.pool.Exec(ctx, `UPDATE agent_runs SET worker_id = NULL, lease_expires_at = NULL
		WHERE id = $1 AND worker_id = $2 AND attempt_count = $3 AND status IN ('running', 'cancel_requested')`, id, o.Worker, o.Attempt)
	return err
}
