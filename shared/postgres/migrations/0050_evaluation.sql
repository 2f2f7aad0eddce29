-- RAG evaluation (shared/evaluation owns every table here): benchmark
-- datasets of a knowledge base and their items, evaluation runs with their
-- per-item results. A run is a sequence of checkpointed batches: next_batch
-- is the first batch not yet committed, so a redelivered batch is a no-op
-- and a crashed one is redone.

CREATE TABLE evaluation_datasets (
    id               bigserial PRIMARY KEY,
    dataset_id       text NOT NULL UNIQUE,
    kb_id            text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description      text NOT NULL DEFAULT '',
    item_count       int NOT NULL DEFAULT 0,
    has_gold_chunks  boolean NOT NULL DEFAULT false,
    has_gold_answers boolean NOT NULL DEFAULT false,
    -- {source: upload | generated, status, progress, params{…}}
    build_metadata   jsonb NOT NULL DEFAULT '{}',
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evaluation_datasets_kb ON evaluation_datasets (kb_id, created_at DESC);

CREATE TABLE evaluation_dataset_items (
    id             bigserial PRIMARY KEY,
    item_id        text NOT NULL UNIQUE,
    dataset_id     text NOT NULL REFERENCES evaluation_datasets (dataset_id) ON DELETE CASCADE,
    kb_id          text NOT NULL,
    item_index     int NOT NULL,
    query_text     text NOT NULL,
    gold_chunk_ids jsonb NOT NULL DEFAULT '[]',
    gold_answer    text,
    UNIQUE (dataset_id, item_index)
);

CREATE TABLE evaluation_runs (
    id               bigserial PRIMARY KEY,
    run_id           text NOT NULL UNIQUE,
    name             text NOT NULL DEFAULT '',
    kb_id            text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    dataset_id       text NOT NULL,
    status           text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    retrieval_config jsonb NOT NULL DEFAULT '{}',
    metrics          jsonb NOT NULL DEFAULT '{}',
    overall_score    double precision,
    total_items      int NOT NULL DEFAULT 0,
    completed_items  int NOT NULL DEFAULT 0,
    batch_size       int NOT NULL CHECK (batch_size > 0),
    next_batch       int NOT NULL DEFAULT 0,
    -- The schedule (and its tick) that started the run, when one did; the
    -- gate's verdict once the run completed under a gated schedule.
    schedule_id      text,
    gate_status      text CHECK (gate_status IN ('passed', 'regressed')),
    gate             jsonb,
    started_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    created_by       text NOT NULL
);
CREATE INDEX evaluation_runs_kb ON evaluation_runs (kb_id, started_at DESC);

CREATE TABLE evaluation_run_items (
    run_id           text NOT NULL REFERENCES evaluation_runs (run_id) ON DELETE CASCADE,
    item_index       int NOT NULL,
    dataset_item_id  text NOT NULL,
    query_text       text NOT NULL,
    gold_chunk_ids   jsonb NOT NULL DEFAULT '[]',
    gold_answer      text,
    generated_answer text,
    retrieved_chunks jsonb NOT NULL DEFAULT '[]',
    metrics          jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, item_index)
);
