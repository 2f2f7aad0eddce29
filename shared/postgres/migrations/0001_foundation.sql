-- Foundation schema: identity, agents, conversations, the request queue, durable
-- runs (attempts, steps, tool calls) and the transactional outbox.
-- Field names follow the original product (spec/yuxi-contracts.md §2) where it has one.

CREATE TABLE instance_state (
    id              int PRIMARY KEY CHECK (id = 1),
    initialized_at  timestamptz NOT NULL DEFAULT now()
);

-- Secrets generated on first start when none are configured (local runs).
CREATE TABLE instance_secrets (
    name        text PRIMARY KEY,
    value       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE departments (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO departments (name, description) VALUES ('default', 'Default department');

CREATE TABLE users (
    id                  bigserial PRIMARY KEY,
    uid                 text NOT NULL UNIQUE,
    username            text NOT NULL,
    phone_number        text UNIQUE,
    avatar              text,
    password_hash       text NOT NULL,
    role                text NOT NULL CHECK (role IN ('superadmin', 'admin', 'user')),
    department_id       bigint REFERENCES departments (id),
    last_login          timestamptz,
    login_failed_count  int NOT NULL DEFAULT 0,
    last_failed_login   timestamptz,
    login_locked_until  timestamptz,
    is_deleted          boolean NOT NULL DEFAULT false,
    deleted_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
    id             bigserial PRIMARY KEY,
    key_hash       text NOT NULL UNIQUE,
    key_prefix     text NOT NULL,
    request_id     text NOT NULL UNIQUE,
    intent_hash    text NOT NULL,
    name           text NOT NULL,
    user_id        bigint NOT NULL REFERENCES users (id),
    department_id  bigint REFERENCES departments (id),
    expires_at     timestamptz,
    is_enabled     boolean NOT NULL DEFAULT true,
    revoked_at     timestamptz,
    last_used_at   timestamptz,
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_user ON api_keys (user_id);

CREATE TABLE agents (
    id           bigserial PRIMARY KEY,
    slug         text NOT NULL UNIQUE CHECK (length(slug) BETWEEN 1 AND 80),
    backend_id   text NOT NULL,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    icon         text,
    pics         jsonb NOT NULL DEFAULT '[]',
    config_json  jsonb NOT NULL DEFAULT '{}',
    share_config jsonb,
    is_default   boolean NOT NULL DEFAULT false,
    is_subagent  boolean NOT NULL DEFAULT false,
    is_builtin   boolean NOT NULL DEFAULT false,
    created_by   text,
    updated_by   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX uq_agents_default ON agents ((true)) WHERE is_default;

INSERT INTO agents (slug, backend_id, name, description, config_json, is_default, is_builtin, created_by)
VALUES ('default-chatbot', 'ChatbotAgent', 'Assistant', 'The built-in general assistant.',
        '{"context": {}}', true, true, 'system');

CREATE TABLE conversations (
    id                   bigserial PRIMARY KEY,
    thread_id            text NOT NULL UNIQUE CHECK (length(thread_id) BETWEEN 1 AND 64),
    creation_request_id  text,
    uid                  text NOT NULL,
    agent_id             text NOT NULL,
    title                text NOT NULL DEFAULT '',
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'deleted')),
    is_pinned            boolean NOT NULL DEFAULT false,
    last_viewed_run_id   text,
    extra_metadata       jsonb NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (uid, creation_request_id)
);
CREATE INDEX conversations_uid ON conversations (uid, updated_at DESC) WHERE status <> 'deleted';

-- The model-facing transcript of a thread is the ordered subset of its messages
-- with a transcript_seq, plus the results of their tool calls. It grows by deltas:
-- a step appends one assistant message; a dispatched request adds its user message.
CREATE SEQUENCE transcript_seq;

CREATE TABLE messages (
    id               bigserial PRIMARY KEY,
    conversation_id  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role             text NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content          text NOT NULL DEFAULT '',
    message_type     text NOT NULL DEFAULT 'text',
    extra_metadata   jsonb NOT NULL DEFAULT '{}',
    image_content    text,
    run_id           text,
    request_id       text,
    delivery_status  text CHECK (delivery_status IN ('queued', 'dispatched', 'rejected', 'complete', 'failed', 'cancelled')),
    transcript_seq   bigint,
    token_count      int,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX messages_conversation ON messages (conversation_id, id);
CREATE UNIQUE INDEX messages_transcript ON messages (conversation_id, transcript_seq) WHERE transcript_seq IS NOT NULL;
CREATE INDEX messages_run ON messages (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE agent_runs (
    id                      text PRIMARY KEY,
    conversation_thread_id  text NOT NULL,
    conversation_id         bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    runtime_scope_id        text NOT NULL,
    agent_slug              text NOT NULL,
    uid                     text NOT NULL,
    status                  text NOT NULL CHECK (status IN ('pending', 'running', 'cancel_requested', 'completed', 'failed', 'cancelled', 'interrupted')),
    request_id              text NOT NULL UNIQUE,
    source                  text NOT NULL DEFAULT 'chat',
    channel                 text NOT NULL DEFAULT 'web',
    created_by_run_id       text REFERENCES agent_runs (id),
    run_type                text NOT NULL CHECK (run_type IN ('chat', 'resume', 'subagent')),
    input_message_id        bigint REFERENCES messages (id),
    output_message_id       bigint REFERENCES messages (id),
    input_payload           jsonb NOT NULL DEFAULT '{}',
    token_usage             jsonb,
    error_type              text,
    error_message           text,
    worker_id               text,
    attempt_count           int NOT NULL DEFAULT 0,
    heartbeat_at            timestamptz,
    lease_expires_at        timestamptz,
    recovery_count          int NOT NULL DEFAULT 0,
    step_count              int NOT NULL DEFAULT 0,
    last_progress_at        timestamptz NOT NULL DEFAULT now(),
    started_at              timestamptz,
    finished_at             timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_agent_runs_resume_parent CHECK (run_type <> 'resume' OR created_by_run_id IS NOT NULL)
);
-- At most one non-terminal run per (user, agent, thread): the database enforces it.
CREATE UNIQUE INDEX uq_agent_runs_one_active_per_thread ON agent_runs (uid, agent_slug, conversation_thread_id)
    WHERE status IN ('pending', 'running', 'cancel_requested');
CREATE INDEX agent_runs_active ON agent_runs (status, lease_expires_at)
    WHERE status IN ('pending', 'running', 'cancel_requested');
CREATE INDEX agent_runs_thread ON agent_runs (conversation_thread_id, created_at DESC);

ALTER TABLE messages ADD CONSTRAINT messages_run_fk FOREIGN KEY (run_id) REFERENCES agent_runs (id) DEFERRABLE INITIALLY DEFERRED;

-- One row per claim of a run step by a worker (immutable facts, outcome filled on close).
CREATE TABLE agent_run_attempts (
    run_id            text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    attempt_no        int NOT NULL,
    step_no           int NOT NULL,
    worker_id         text NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz NOT NULL,
    finished_at       timestamptz,
    outcome           text,
    error_type        text,
    error_message     text,
    PRIMARY KEY (run_id, attempt_no)
);

-- Exactly one record per (run, step): written once by the step's commit.
CREATE TABLE agent_run_steps (
    run_id                text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    step_no               int NOT NULL,
    attempt_no            int NOT NULL,
    assistant_message_id  bigint REFERENCES messages (id),
    tool_call_count       int NOT NULL DEFAULT 0,
    pending_tools         int NOT NULL DEFAULT 0,
    outcome               text NOT NULL,
    usage                 jsonb,
    started_at            timestamptz NOT NULL,
    committed_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_no)
);

CREATE TABLE agent_run_requests (
    id                      bigserial PRIMARY KEY,
    request_id              text NOT NULL UNIQUE,
    uid                     text NOT NULL,
    agent_slug              text NOT NULL,
    conversation_thread_id  text NOT NULL,
    source                  text NOT NULL DEFAULT 'chat',
    channel                 text NOT NULL DEFAULT 'web',
    external_id             text,
    origin_metadata         jsonb NOT NULL DEFAULT '{}',
    queue_policy            text NOT NULL CHECK (queue_policy IN ('enqueue', 'reject', 'steer')),
    status                  text NOT NULL CHECK (status IN ('queued', 'dispatched', 'cancelled', 'rejected', 'failed')),
    input_message_id        bigint NOT NULL REFERENCES messages (id),
    dispatched_run_id       text REFERENCES agent_runs (id),
    input_payload           jsonb NOT NULL DEFAULT '{}',
    error_message           text,
    created_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    dispatched_at           timestamptz,
    updated_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_run_requests_queue ON agent_run_requests (uid, agent_slug, conversation_thread_id, status, created_at, id);

CREATE TABLE tool_calls (
    id              bigserial PRIMARY KEY,
    run_id          text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    step_no         int NOT NULL,
    message_id      bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    call_index      int NOT NULL,
    tool_call_id    text NOT NULL,
    tool_name       text NOT NULL,
    tool_input      text NOT NULL DEFAULT '',
    tool_output     text,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'success', 'error', 'interrupted', 'cancelled')),
    error_message   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    UNIQUE (run_id, tool_call_id),
    UNIQUE (run_id, step_no, call_index)
);
CREATE INDEX tool_calls_message ON tool_calls (message_id, call_index);

CREATE TABLE improvement_marks (
    id            text PRIMARY KEY,
    run_id        text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    tool_call_id  text NOT NULL,
    uid           text NOT NULL,
    agent_slug    text NOT NULL,
    thread_id     text NOT NULL,
    reason        text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, tool_call_id)
);

-- Transactional outbox: rows are written in the transaction that causes them and
-- published after commit. claimed_until is a publish lease: the writer owns a row
-- for a short while (fast path); afterwards the sweep may republish it.
CREATE TABLE outbox (
    id             bigserial PRIMARY KEY,
    event_id       text NOT NULL UNIQUE,
    type           text NOT NULL,
    source         text NOT NULL,
    subject        text,
    data           jsonb NOT NULL,
    extensions     jsonb NOT NULL DEFAULT '{}',
    dedupe_key     text UNIQUE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    claimed_until  timestamptz,
    published_at   timestamptz,
    attempts       int NOT NULL DEFAULT 0,
    last_error     text
);
CREATE INDEX outbox_unpublished ON outbox (claimed_until, id) WHERE published_at IS NULL;

-- Permanent handler failures: acknowledged, never retried, kept for inspection.
CREATE TABLE event_failures (
    id          bigserial PRIMARY KEY,
    event_id    text NOT NULL,
    type        text NOT NULL,
    source      text NOT NULL,
    handler     text NOT NULL,
    error       text NOT NULL,
    data        jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (event_id, source, handler)
);
