-- Outbox retention. Published outbox rows are deleted after a retention window
-- (shared/outbox/retention.go); the partial index finds them without reading
-- the rows still in flight.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

-- Dedupe keys that must outlive their outbox row: a late duplicate of these
-- must still be suppressed after the row is pruned (the analysis of every key
-- is in shared/outbox/retention.go). Compact: the key and when it was taken;
-- pruned after its own, longer retention.
CREATE TABLE outbox_keys (
    key         text PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_keys_created ON outbox_keys (created_at);

-- Keys of that class already written keep suppressing once their rows go.
INSERT INTO outbox_keys (key, created_at)
SELECT dedupe_key, created_at FROM outbox
WHERE dedupe_key LIKE 'run-finished:%' OR dedupe_key LIKE 'bucket:%'
ON CONFLICT (key) DO NOTHING;
