package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
)

// Finish describes a terminal transition.
type Finish struct {
	Status          string
	ErrorType       string
	ErrorMessage    string
	OutputMessageID *int64
	StepCount       *int
	TokenUsage      json.RawMessage
	// Owner, when set, restricts the transition to the worker holding the
	// lease with this attempt number (a stale worker cannot end the run).
	Owner *Owner
}

// Owner identifies a lease holder.
type Owner struct {
	Worker  string
	Attempt int
}

var deliveryForStatus = map[string]string{
	StatusCompleted:   "complete",
	StatusInterrupted: "complete",
	StatusFailed:      "failed",
	StatusCancelled:   "cancelled",
}

// finishSQL moves a non-terminal run to a terminal status and, only when it
// did, projects the outcome onto the input message and closes the open
// attempt — one statement, one round trip. $8/$9 guard
// the transition to the lease holder when set. It returns the run's row, or
// no row when nothing changed.
var finishSQL = finishSQLWith("$5")

// finishStepSQL is finishSQL for CommitStep's one-round-trip path: the
// output message is the one its transaction inserted just before ($5 is
// passed NULL).
var finishStepSQL = finishSQLWith("coalesce($5::bigint, currval(pg_get_serial_sequence('messages', 'id')))")

// finishSQLWith is finishSQL with output the SQL expression of the output
// message.
func finishSQLWith(output string) string {
	return `
	WITH r AS (
		UPDATE agent_runs SET status = $2, finished_at = clock_timestamp(), worker_id = NULL, lease_expires_at = NULL,
			error_type = NULLIF($3, ''), error_message = NULLIF($4, ''),
			output_message_id = coalesce(` + output + `, output_message_id), step_count = coalesce($6, step_count),
			token_usage = coalesce($7, token_usage), last_progress_at = clock_timestamp(), updated_at = clock_timestamp()
		WHERE id = $1 AND status IN ('pending', 'running', 'cancel_requested')
		  AND ($8::text IS NULL OR (worker_id = $8 AND attempt_count = $9))
		RETURNING *),
	m AS (UPDATE messages SET delivery_status = $10 FROM r WHERE messages.id = r.input_message_id RETURNING 1),
	a AS (UPDATE agent_run_attempts SET finished_at = clock_timestamp(), outcome = $2, error_type = NULLIF($3, ''), error_message = NULLIF($4, '')
		FROM r WHERE agent_run_attempts.run_id = r.id AND agent_run_attempts.finished_at IS NULL RETURNING 1)
	SELECT ` + runCols + ` FROM r`
}

// finishArgs are finishSQL's arguments for f.
func finishArgs(id string, f Finish) ([]any, error) {
	if !IsTerminal(f.Status) {
		return nil, fmt.Errorf("finish run %s: %q is not a terminal status", id, f.Status)
	}
	var worker *string
	attempt := 0
	if f.Owner != nil {
		worker, attempt = &f.Owner.Worker, f.Owner.Attempt
	}
	var usage any
	if len(f.TokenUsage) > 0 {
		usage = []byte(f.TokenUsage)
	}
	return []any{id, f.Status, f.ErrorType, truncate(f.ErrorMessage, 2000), f.OutputMessageID, f.StepCount, usage,
		worker, attempt, deliveryForStatus[f.Status]}, nil
}

func finishedEvent(r Run) outbox.Pending {
	return outbox.Pending{
		Payload:   events.RunFinished{RunID: r.ID, ThreadID: r.ThreadID, UID: r.UID, AgentSlug: r.AgentSlug, Status: r.Status},
		DedupeKey: "run-finished:" + r.ID,
	}
}

// finishTx moves a non-terminal run to f.Status inside tx and emits
// run.finished. It reports false (and changes nothing) when the run is already
// terminal or the owner guard does not match.
func finishTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, id string, f Finish) (Run, bool, error) {
	args, err := finishArgs(id, f)
	if err != nil {
		return Run{}, false, err
	}
	r, err := scanRun(tx.QueryRow(ctx, finishSQL, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, fmt.Errorf("finish run %s: %w", id, err)
	}
	return r, true, emit(finishedEvent(r))
}

// Finish applies a terminal transition in its own transaction and then
// writes the run's closing stream events. changed is false when the run was
// already terminal (or the owner guard failed).
func (s *Store) Finish(ctx context.Context, id string, f Finish) (r Run, changed bool, err error) {
	err = s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		r, changed, err = finishTx(ctx, tx, emit, id, f)
		return err
	})
	if err == nil && changed {
		s.closed(ctx, r)
	}
	return r, changed, err
}

// CancelOutcome says what a cancel request did.
type CancelOutcome int

const (
	CancelNoop      CancelOutcome = iota // already terminal or already cancel_requested
	CancelImmediate                      // a pending run was cancelled at once
	CancelRequested                      // a running run will stop at its next boundary
)

// RequestCancel cancels run id of uid: a pending run ends cancelled at once
// (and its stream is closed), a running run becomes cancel_requested (the
// worker stops at the step boundary and ends it cancelled). The cancellation
// cascades to the run's active sub-agent runs in the same transaction (see
// cancelChildrenTx). The caller signals a running worker (runstream's cancel
// signal).
func (s *Store) RequestCancel(ctx context.Context, uid, id string) (Run, CancelOutcome, error) {
	var (
		out     Run
		outcome CancelOutcome
		ended   []Run
	)
	err := s.outbox.Tx(ctx, s.pool, func(tx pgx.Tx, emit outbox.Emit) error {
		if err := s.requestCancelTx(ctx, tx, emit, uid, id, &out, &outcome); err != nil {
			return err
		}
		var err error
		ended, err = cancelChildrenTx(ctx, tx, emit, id)
		return err
	})
	if err == nil {
		for _, c := range ended {
			s.closed(ctx, c)
		}
	}
	if err == nil && outcome == CancelImmediate {
		s.closed(ctx, out)
	}
	return out, outcome, err
}

func (s *Store) requestCancelTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, uid, id string, outp *Run, outcomep *CancelOutcome) error {
	var (
		out     Run
		outcome CancelOutcome
	)
	defer func() { *outp, *outcomep = out, outcome }()
	err := func() error {
		r, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM agent_runs WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && r.UID != uid) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		switch r.Status {
		case StatusPending:
			fr, changed, err := finishTx(ctx, tx, emit, id, Finish{Status: StatusCancelled, ErrorType: "cancelled", ErrorMessage: "the run was cancelled before it started"})
			if err != nil {
				return err
			}
			if changed {
				out, outcome = fr, CancelImmediate
				return nil
			}
		case StatusRunning:
			r, err = scanRun(tx.QueryRow(ctx, `UPDATE agent_runs SET status = 'cancel_requested', updated_at = clock_timestamp()
				WHERE id = $1 RETURNING `+runCols, id))
			if err != nil {
				return err
			}
			out, outcome = r, CancelRequested
			return nil
		}
		out, outcome = r, CancelNoop
		return nil
	}()
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// ErrDuplicateStep is returned when the step was already committed.
var ErrDuplicateStep = errors.New("step already committed")

// ErrResumeConflict and friends are returned by resume validation.
var (
	ErrNotInterrupted   = failure.Conflict("run_not_interrupted", "only an interrupted run can be resumed")
	ErrResumeSuperseded = failure.Conflict("resume_superseded", "a newer run exists on this thread; this run can no longer be resumed")
)
