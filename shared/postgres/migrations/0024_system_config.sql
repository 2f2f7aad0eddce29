-- System settings (/api/system/config): one row per key set by an admin;
-- keys never set read their defaults from shared/sysconfig's schema.
-- Owned by shared/sysconfig. Processes cache a snapshot and reload it when
-- the Redis version key moves (see shared/sysconfig).
CREATE TABLE system_config (
    key         text        PRIMARY KEY,
    value       jsonb       NOT NULL,
    updated_by  bigint,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
