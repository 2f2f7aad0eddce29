-- Token budgets (shared/budget): a reservation is now also the charge of
-- last resort. One whose lease ends unsettled (the step crashed between its
-- model call and Settle, or Settle failed) is charged at its reserved
-- amount by the next admission on its budget or by Sweep, and kept with
-- charged_at set so that a late Settle charges only the difference.
-- A reservation's size is the call's own bound (estimated input + the
-- output cap sent as max_tokens, or the per-call ceiling), no longer the
-- largest call seen, so max_call_tokens goes.
ALTER TABLE token_budget_reservations ADD COLUMN charged_at timestamptz;
CREATE INDEX token_budget_reservations_charged ON token_budget_reservations (charged_at) WHERE charged_at IS NOT NULL;
ALTER TABLE token_budgets DROP COLUMN max_call_tokens;
