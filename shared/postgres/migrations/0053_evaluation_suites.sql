-- Agent evaluation suites (shared/evaluation owns every table here): a suite
-- is an agent slug with items (input, optional expected output, checks), a
-- concurrency and a per-item timeout; its items live inline or come from a
-- Langfuse dataset when a run starts. A suite run freezes its items and is
-- evaluated in checkpointed batches like a RAG run (next_batch), each item
-- one run of the agent through the normal run path (source
-- agent_evaluation) with a request id derived from (run, item), so a
-- redone batch finds the same agent runs instead of starting new ones.
CREATE TABLE evaluation_suites (
    id               bigserial PRIMARY KEY,
    suite_id         text NOT NULL UNIQUE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description      text NOT NULL DEFAULT '',
    agent_slug       text NOT NULL,
    -- [{input, expected_output?, checks: [{type, …}]}]
    items            jsonb NOT NULL DEFAULT '[]',
    -- Checks applied to every item (besides its own), e.g. to a Langfuse dataset's.
    checks           jsonb NOT NULL DEFAULT '[]',
    langfuse_dataset text,
    concurrency      int NOT NULL DEFAULT 4 CHECK (concurrency BETWEEN 1 AND 32),
    timeout_seconds  int NOT NULL DEFAULT 300 CHECK (timeout_seconds BETWEEN 1 AND 3600),
    model_spec       text NOT NULL DEFAULT '',
    judge_llm        text NOT NULL DEFAULT '',
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evaluation_suites_owner ON evaluation_suites (created_by, created_at DESC);

CREATE TABLE evaluation_suite_runs (
    id              bigserial PRIMARY KEY,
    run_id          text NOT NULL UNIQUE,
    suite_id        text NOT NULL REFERENCES evaluation_suites (suite_id) ON DELETE CASCADE,
    name            text NOT NULL DEFAULT '',
    status          text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    -- The suite as it was when the run started: agent, items, limits.
    config          jsonb NOT NULL,
    metrics         jsonb NOT NULL DEFAULT '{}',
    overall_score   double precision,
    total_items     int NOT NULL DEFAULT 0,
    completed_items int NOT NULL DEFAULT 0,
    batch_size      int NOT NULL CHECK (batch_size > 0),
    next_batch      int NOT NULL DEFAULT 0,
    schedule_id     text,
    gate_status     text CHECK (gate_status IN ('passed', 'regressed')),
    gate            jsonb,
    started_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    created_by      text NOT NULL
);
CREATE INDEX evaluation_suite_runs_suite ON evaluation_suite_runs (suite_id, started_at DESC);

CREATE TABLE evaluation_suite_run_items (
    run_id        text NOT NULL REFERENCES evaluation_suite_runs (run_id) ON DELETE CASCADE,
    item_index    int NOT NULL,
    input         text NOT NULL,
    expected_output text,
    status        text NOT NULL,
    output        text NOT NULL DEFAULT '',
    agent_run_id  text,
    thread_id     text,
    trajectory    jsonb,
    checks        jsonb NOT NULL DEFAULT '[]',
    judge_score   double precision,
    passed        boolean NOT NULL,
    error         text,
    PRIMARY KEY (run_id, item_index)
);

-- A schedule targets a RAG run template (kb_id + dataset_id) or a suite;
-- webhook_url is told of regressions (through the SSRF-guarded client).
ALTER TABLE evaluation_schedules
    ALTER COLUMN kb_id DROP NOT NULL,
    ALTER COLUMN dataset_id DROP NOT NULL,
    ADD COLUMN suite_id text REFERENCES evaluation_suites (suite_id) ON DELETE CASCADE,
    ADD COLUMN webhook_url text,
    ADD CONSTRAINT evaluation_schedules_one_target CHECK ((kb_id IS NULL) <> (suite_id IS NULL));
