-- Token budgets with periods (shared/budget): a budget is for its lifetime
-- (used_tokens counts from when it was set or reset, as before) or renews
-- every UTC day or month. period_start is the start of the window
-- used_tokens counts in; once the window has passed, the budget's use reads
-- as 0 and the next charge starts the new window.
ALTER TABLE token_budgets
    ADD COLUMN period       text        NOT NULL DEFAULT 'lifetime' CHECK (period IN ('lifetime', 'daily', 'monthly')),
    ADD COLUMN period_start timestamptz NOT NULL DEFAULT now();

-- The start of a budget's current window.
CREATE FUNCTION token_budget_window(period text, period_start timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE period
        WHEN 'daily' THEN date_trunc('day', now(), 'UTC')
        WHEN 'monthly' THEN date_trunc('month', now(), 'UTC')
        ELSE period_start END
$$;

-- Every model call of a step attempt has its own reservation: the context
-- summary (call_no 0) and each try of the turn (1, 2, …: a retried model
-- call is admitted again).
ALTER TABLE token_budget_reservations ADD COLUMN call_no int NOT NULL DEFAULT 1;
ALTER TABLE token_budget_reservations DROP CONSTRAINT token_budget_reservations_pkey;
ALTER TABLE token_budget_reservations ADD PRIMARY KEY (run_id, step_no, attempt, call_no, scope, subject);
