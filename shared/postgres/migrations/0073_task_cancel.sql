-- Cancelling tasks (issue 9): the task centre (shared/task) asks
-- shared/evaluation, the owner of these tables, to stop an evaluation run;
-- the run stops at its next batch boundary and records cancelled. (A
-- generated dataset's cancel lives in its build_metadata JSON:
-- cancel_requested, status cancelled.)
ALTER TABLE evaluation_runs ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE evaluation_runs DROP CONSTRAINT evaluation_runs_status_check;
ALTER TABLE evaluation_runs ADD CONSTRAINT evaluation_runs_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled'));
