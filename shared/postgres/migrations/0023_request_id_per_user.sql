-- request_id is an idempotency key chosen by the client: it is scoped to
-- the user who sent it (issue 9). Globally unique, another user's use of the
-- same key answered 409 request_id_conflict — an oracle for other tenants'
-- ids — and blocked the key. Now each user has their own key space.
ALTER TABLE agent_run_requests DROP CONSTRAINT agent_run_requests_request_id_key,
    ADD CONSTRAINT agent_run_requests_uid_request_id_key UNIQUE (uid, request_id);
ALTER TABLE agent_runs DROP CONSTRAINT agent_runs_request_id_key,
    ADD CONSTRAINT agent_runs_uid_request_id_key UNIQUE (uid, request_id);
ALTER TABLE api_keys DROP CONSTRAINT api_keys_request_id_key,
    ADD CONSTRAINT api_keys_user_id_request_id_key UNIQUE (user_id, request_id);
