-- Scheduled evaluations: a cron expression (with its time zone) on a RAG run
-- template (a dataset and a model_config), and an optional gate. A tick
-- starts a schedule's due evaluation once: the fire row keyed by (schedule,
-- due time) is written in the run's transaction, so ticks delivered to
-- several instances (or twice) start one run.
CREATE TABLE evaluation_schedules (
    id           bigserial PRIMARY KEY,
    schedule_id  text NOT NULL UNIQUE,
    kb_id        text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    cron         text NOT NULL,
    timezone     text NOT NULL DEFAULT 'UTC',
    dataset_id   text NOT NULL,
    model_config jsonb NOT NULL DEFAULT '{}',
    -- {metric, baseline: last_passing | pinned, pinned_run_id, tolerance}
    gate         jsonb,
    enabled      boolean NOT NULL DEFAULT true,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE evaluation_schedule_fires (
    schedule_id text NOT NULL REFERENCES evaluation_schedules (schedule_id) ON DELETE CASCADE,
    due_at      timestamptz NOT NULL,
    run_id      text,
    fired_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, due_at)
);
