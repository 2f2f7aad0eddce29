-- The embedded vector store (shared/vector, Postgres engine). PostgreSQL holds
-- the vectors; each process searches its own in-memory copy of a collection
-- and keeps it current by reading only what changed since its copy:
--   * every write to a collection takes the collection row's lock and stamps
--     its rows with version = nextval('vector_versions'), so within a
--     collection versions grow in commit order;
--   * deleted ids leave a tombstone with the deleting version; tombstones
--     older than a TTL are purged and purged_version records the newest purged
--     one (a copy older than that must be reloaded whole);
--   * epoch names one incarnation of a collection: a dropped and re-created
--     collection never looks like the old one to a cache.
-- A collection is a knowledge base (name = kb_id) but is not tied to
-- knowledge_bases by a key: the vector store is a capability used by the kb
-- domain, which drops the collection when it deletes the KB.

CREATE SEQUENCE vector_versions;

CREATE TABLE vector_collections (
    name            text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 255),
    dim             int NOT NULL CHECK (dim BETWEEN 1 AND 32768),
    epoch           bigint NOT NULL,
    version         bigint NOT NULL,
    purged_version  bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE vector_items (
    collection  text NOT NULL REFERENCES vector_collections (name) ON DELETE CASCADE,
    id          text NOT NULL,                -- chunk id
    grp         text NOT NULL,                -- file id
    vec         bytea NOT NULL,               -- dim little-endian float32, as written (not normalized)
    version     bigint NOT NULL,
    PRIMARY KEY (collection, id)
);
-- Random floats do not compress: store them out of line without trying.
ALTER TABLE vector_items ALTER COLUMN vec SET STORAGE EXTERNAL;
CREATE INDEX vector_items_version ON vector_items (collection, version);
CREATE INDEX vector_items_grp ON vector_items (collection, grp);

CREATE TABLE vector_tombstones (
    collection  text NOT NULL REFERENCES vector_collections (name) ON DELETE CASCADE,
    id          text NOT NULL,
    version     bigint NOT NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection, id)
);
CREATE INDEX vector_tombstones_version ON vector_tombstones (collection, version);
