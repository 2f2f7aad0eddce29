-- Failed logins are counted per (login as typed, client address), not per
-- account: a stranger's wrong passwords lock that stranger's address out of
-- that account and nothing else (never the owner's other addresses, never
-- existing sessions). Unknown logins are counted the same way, so that an
-- unknown and a locked account answer alike. Owned by shared/auth.
CREATE TABLE login_throttle (
    login         text        NOT NULL,
    client        text        NOT NULL,
    failed_count  integer     NOT NULL DEFAULT 0,
    locked_until  timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (login, client)
);
CREATE INDEX login_throttle_updated ON login_throttle (updated_at);
