-- The task centre lists a user's own agent evaluation suite runs
-- (shared/task reads evaluation_suite_runs by created_by, newest first).
CREATE INDEX evaluation_suite_runs_owner ON evaluation_suite_runs (created_by, started_at DESC);
