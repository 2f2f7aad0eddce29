-- Identity administration (issue 9): session revocation, impersonation audit,
-- CLI device login, OIDC login, per-user settings. Owners: shared/auth owns
-- every table here except user_config and agent_envs (shared/usersettings)
-- and oidc_login_states / oidc_login_codes (shared/oidc).

-- token_version is copied into every access token ("ver"); bumping it
-- revokes every token issued before (soft delete, password change by an admin).
ALTER TABLE users ADD COLUMN token_version int NOT NULL DEFAULT 0;

-- Every impersonation a superadmin starts: who, whom, the token's id, from where.
CREATE TABLE impersonation_audit (
    id              bigserial PRIMARY KEY,
    actor_user_id   bigint NOT NULL REFERENCES users (id),
    target_user_id  bigint NOT NULL REFERENCES users (id),
    token_id        text NOT NULL UNIQUE,
    client_address  text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX impersonation_audit_target ON impersonation_audit (target_user_id, created_at DESC);

-- CLI device login: pending → approved → consumed (or expired by time).
CREATE TABLE cli_auth_sessions (
    id                bigserial PRIMARY KEY,
    device_code_hash  text NOT NULL UNIQUE,
    user_code         text NOT NULL UNIQUE,
    status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'consumed')),
    key_name          text NOT NULL,
    approved_user_id  bigint REFERENCES users (id),
    api_key_id        bigint REFERENCES api_keys (id),
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    approved_at       timestamptz,
    consumed_at       timestamptz
);
CREATE INDEX cli_auth_sessions_expires ON cli_auth_sessions (expires_at);

-- OIDC subject ↔ user bindings (instead of the original's placeholder users).
CREATE TABLE oidc_identities (
    issuer      text NOT NULL,
    subject     text NOT NULL,
    user_id     bigint NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);

-- An authorization request in flight: its state (hashed) and nonce.
CREATE TABLE oidc_login_states (
    state_hash     text PRIMARY KEY,
    nonce          text NOT NULL,
    redirect_path  text NOT NULL DEFAULT '/',
    expires_at     timestamptz NOT NULL
);

-- One-time codes the callback hands the browser, exchanged for a token.
CREATE TABLE oidc_login_codes (
    code_hash   text PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id),
    expires_at  timestamptz NOT NULL
);

CREATE TABLE user_config (
    user_id        bigint PRIMARY KEY REFERENCES users (id),
    enable_memory  boolean NOT NULL DEFAULT false,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Per-user sandbox environment variables, injected into the user's sandboxes.
CREATE TABLE agent_envs (
    user_id     bigint PRIMARY KEY REFERENCES users (id),
    env         jsonb NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL DEFAULT now()
);
