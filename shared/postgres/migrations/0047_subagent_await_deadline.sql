-- subagent_await with timeout_seconds (owner: shared/subagent): the wait's
-- deadline. The dispatcher's sweep answers a wait past its deadline whose
-- child is still running with the child's current snapshot and
-- wait_timed_out; the child's run.finished then finds the call answered.
ALTER TABLE subagent_waits ADD COLUMN deadline timestamptz;
CREATE INDEX subagent_waits_deadline ON subagent_waits (deadline) WHERE deadline IS NOT NULL;
