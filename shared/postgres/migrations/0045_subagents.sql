-- Sub-agents (owner: shared/subagent). A child run is an agent_runs row with
-- run_type 'subagent' and created_by_run_id = the parent run (written by
-- shared/run); these tables record what the run table does not say.

-- A child thread and the parent thread it belongs to: ownership of a child
-- (thread or run) is checked against it on every tool call.
CREATE TABLE subagent_threads (
    child_thread_id    text PRIMARY KEY,
    uid                text NOT NULL,
    parent_thread_id   text NOT NULL,
    subagent_slug      text NOT NULL,
    created_by_run_id  text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subagent_threads_parent ON subagent_threads (parent_thread_id);

-- The child a tool call (task, subagent_start) started: one per call, so a
-- redelivered call finds its child instead of starting a second one.
CREATE TABLE subagent_starts (
    parent_run_id  text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    tool_call_id   text NOT NULL,
    child_run_id   text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (parent_run_id, tool_call_id)
);

-- A parent's tool call (task, subagent_await) waiting for a child run: its
-- result is recorded when the child's run.finished event is handled (no
-- function waits).
CREATE TABLE subagent_waits (
    parent_run_id  text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    tool_call_id   text NOT NULL,
    child_run_id   text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (parent_run_id, tool_call_id)
);
CREATE INDEX subagent_waits_child ON subagent_waits (child_run_id);

-- Children of a run (cancel cascade, the recovery sweep's "waits for a child").
CREATE INDEX agent_runs_created_by ON agent_runs (created_by_run_id) WHERE created_by_run_id IS NOT NULL;
