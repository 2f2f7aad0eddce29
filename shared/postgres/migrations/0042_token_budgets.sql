-- Token budgets (shared/budget): a limit of model tokens per user (subject =
-- uid) or per agent (subject = agent slug), set by the superadmin
-- (PUT /api/system/token-budgets). used_tokens counts from when the budget
-- was set (or last reset); max_call_tokens is the largest single call seen,
-- the size a concurrent call reserves.
CREATE TABLE token_budgets (
    scope           text   NOT NULL CHECK (scope IN ('user', 'agent')),
    subject         text   NOT NULL CHECK (subject <> ''),
    limit_tokens    bigint NOT NULL CHECK (limit_tokens >= 0),
    used_tokens     bigint NOT NULL DEFAULT 0,
    max_call_tokens bigint NOT NULL DEFAULT 0,
    updated_by      text   NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, subject)
);

-- A model call admitted but not yet settled: its tokens count against the
-- budget until it is settled or its lease ends (a crashed step's
-- reservation simply expires).
CREATE TABLE token_budget_reservations (
    run_id     text   NOT NULL,
    step_no    int    NOT NULL,
    attempt    int    NOT NULL,
    scope      text   NOT NULL,
    subject    text   NOT NULL,
    tokens     bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, step_no, attempt, scope, subject),
    FOREIGN KEY (scope, subject) REFERENCES token_budgets (scope, subject) ON DELETE CASCADE
);
CREATE INDEX token_budget_reservations_budget ON token_budget_reservations (scope, subject, expires_at);
