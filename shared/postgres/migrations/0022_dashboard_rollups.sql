-- Dashboard rollups (shared/dashboard owns this table and the triggers
-- below). The dashboard's counts are maintained in the same transaction as
-- the rows they count — by statement-level triggers on messages,
-- conversations, tool_calls and message_feedbacks — so that no dashboard
-- route scans those tables, and every writer (whatever package) keeps them
-- exact without knowing about them.
--
-- metric/category/bucket: what is counted. bucket is the UTC hour of the
-- row's created_at for time series, or 'epoch' for all-time totals. shard
-- is the writing backend's pid: concurrent transactions never touch the
-- same rollup row (one connection runs one transaction at a time), so they
-- neither queue on a hot row nor deadlock, whatever tables they write in
-- whatever order. Shard 0 (no backend has pid 0) holds what
-- dashboard_compact() folded in; readers sum the shards.
--
-- Metrics:
--   messages            hourly, by role           (rows of messages; +insert −delete)
--   messages_total      epoch, by role
--   models              hourly, by extra_metadata.model_spec of assistant messages
--   tokens              hourly, input_tokens / output_tokens (extra_metadata.usage)
--   conversations       hourly, by agent_id       (+insert −delete)
--   conversations_agent epoch, by agent_id
--   conversations_status epoch, by status         (+insert ±update −delete)
--   tool_calls          hourly, by tool_name      (+insert −delete)
--   tool_status         epoch, by status|tool_name (+insert ±update −delete)
--   tool_agent          epoch, by the run's agent (+insert only: calls made)
--   feedback            epoch, by rating          (+insert ±update −delete)
CREATE TABLE dashboard_rollups (
    metric   text NOT NULL,
    category text NOT NULL,
    bucket   timestamp NOT NULL,
    shard    integer NOT NULL,
    n        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (metric, bucket, category, shard)
);

-- Each trigger adds a statement's delta, summed per key, to the writing
-- backend's own rows: one upsert per key and statement, whatever the number
-- of rows.
CREATE FUNCTION dashboard_messages_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), sum(n) FROM (
            SELECT 'messages' AS metric, role AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM new_rows
            UNION ALL SELECT 'messages_total', role, 'epoch', 1 FROM new_rows
            UNION ALL SELECT 'models', extra_metadata->>'model_spec', date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM new_rows
                WHERE role = 'assistant' AND coalesce(extra_metadata->>'model_spec', '') <> ''
            UNION ALL SELECT 'tokens', k, date_trunc('hour', created_at AT TIME ZONE 'UTC'), (extra_metadata->'usage'->>k)::bigint
                FROM new_rows, unnest(ARRAY['input_tokens', 'output_tokens']) k WHERE jsonb_typeof(extra_metadata->'usage'->k) = 'number'
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSE
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), -sum(n) FROM (
            SELECT 'messages' AS metric, role AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM old_rows
            UNION ALL SELECT 'messages_total', role, 'epoch', 1 FROM old_rows
            UNION ALL SELECT 'models', extra_metadata->>'model_spec', date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM old_rows
                WHERE role = 'assistant' AND coalesce(extra_metadata->>'model_spec', '') <> ''
            UNION ALL SELECT 'tokens', k, date_trunc('hour', created_at AT TIME ZONE 'UTC'), (extra_metadata->'usage'->>k)::bigint
                FROM old_rows, unnest(ARRAY['input_tokens', 'output_tokens']) k WHERE jsonb_typeof(extra_metadata->'usage'->k) = 'number'
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER dashboard_messages_ins AFTER INSERT ON messages REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_messages_trg();
CREATE TRIGGER dashboard_messages_del AFTER DELETE ON messages REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_messages_trg();

CREATE FUNCTION dashboard_conversations_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), sum(n) FROM (
            SELECT 'conversations' AS metric, agent_id AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM new_rows
            UNION ALL SELECT 'conversations_agent', agent_id, 'epoch', 1 FROM new_rows
            UNION ALL SELECT 'conversations_status', status, 'epoch', 1 FROM new_rows
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), -sum(n) FROM (
            SELECT 'conversations' AS metric, agent_id AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM old_rows
            UNION ALL SELECT 'conversations_agent', agent_id, 'epoch', 1 FROM old_rows
            UNION ALL SELECT 'conversations_status', status, 'epoch', 1 FROM old_rows
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSE
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT 'conversations_status', category, 'epoch', pg_backend_pid(), sum(n) FROM (
            SELECT o.status AS category, -1::bigint AS n FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE w.status <> o.status
            UNION ALL SELECT w.status, 1 FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE w.status <> o.status
        ) x GROUP BY category ORDER BY 2
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER dashboard_conversations_ins AFTER INSERT ON conversations REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_conversations_trg();
CREATE TRIGGER dashboard_conversations_upd AFTER UPDATE ON conversations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_conversations_trg();
CREATE TRIGGER dashboard_conversations_del AFTER DELETE ON conversations REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_conversations_trg();

CREATE FUNCTION dashboard_tool_calls_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), sum(n) FROM (
            SELECT 'tool_calls' AS metric, tool_name AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM new_rows
            UNION ALL SELECT 'tool_status', status || '|' || tool_name, 'epoch', 1 FROM new_rows
            UNION ALL SELECT 'tool_agent', coalesce(r.agent_slug, ''), 'epoch', 1 FROM new_rows t LEFT JOIN agent_runs r ON r.id = t.run_id
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, pg_backend_pid(), -sum(n) FROM (
            SELECT 'tool_calls' AS metric, tool_name AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM old_rows
            UNION ALL SELECT 'tool_status', status || '|' || tool_name, 'epoch', 1 FROM old_rows
        ) x GROUP BY metric, category, bucket ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSE
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT 'tool_status', category, 'epoch', pg_backend_pid(), sum(n) FROM (
            SELECT o.status || '|' || o.tool_name AS category, -1::bigint AS n FROM old_rows o JOIN new_rows w ON w.id = o.id
                WHERE w.status <> o.status OR w.tool_name <> o.tool_name
            UNION ALL SELECT w.status || '|' || w.tool_name, 1 FROM old_rows o JOIN new_rows w ON w.id = o.id
                WHERE w.status <> o.status OR w.tool_name <> o.tool_name
        ) x GROUP BY category ORDER BY 2
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER dashboard_tool_calls_ins AFTER INSERT ON tool_calls REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_tool_calls_trg();
CREATE TRIGGER dashboard_tool_calls_upd AFTER UPDATE ON tool_calls REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_tool_calls_trg();
CREATE TRIGGER dashboard_tool_calls_del AFTER DELETE ON tool_calls REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_tool_calls_trg();

CREATE FUNCTION dashboard_feedbacks_trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT 'feedback', rating, 'epoch', pg_backend_pid(), count(*) FROM new_rows GROUP BY rating ORDER BY 2
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT 'feedback', rating, 'epoch', pg_backend_pid(), -count(*) FROM old_rows GROUP BY rating ORDER BY 2
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    ELSE
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT 'feedback', category, 'epoch', pg_backend_pid(), sum(n) FROM (
            SELECT o.rating AS category, -1::bigint AS n FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE w.rating <> o.rating
            UNION ALL SELECT w.rating, 1 FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE w.rating <> o.rating
        ) x GROUP BY category ORDER BY 2
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER dashboard_feedbacks_ins AFTER INSERT ON message_feedbacks REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_feedbacks_trg();
CREATE TRIGGER dashboard_feedbacks_upd AFTER UPDATE ON message_feedbacks REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_feedbacks_trg();
CREATE TRIGGER dashboard_feedbacks_del AFTER DELETE ON message_feedbacks REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dashboard_feedbacks_trg();

-- What exists already.
INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
SELECT metric, category, bucket, 0, sum(n) FROM (
    SELECT 'messages' AS metric, role AS category, date_trunc('hour', created_at AT TIME ZONE 'UTC') AS bucket, 1::bigint AS n FROM messages
    UNION ALL SELECT 'messages_total', role, 'epoch', 1 FROM messages
    UNION ALL SELECT 'models', extra_metadata->>'model_spec', date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM messages
        WHERE role = 'assistant' AND coalesce(extra_metadata->>'model_spec', '') <> ''
    UNION ALL SELECT 'tokens', k, date_trunc('hour', created_at AT TIME ZONE 'UTC'), (extra_metadata->'usage'->>k)::bigint
        FROM messages, unnest(ARRAY['input_tokens', 'output_tokens']) k WHERE jsonb_typeof(extra_metadata->'usage'->k) = 'number'
    UNION ALL SELECT 'conversations', agent_id, date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM conversations
    UNION ALL SELECT 'conversations_agent', agent_id, 'epoch', 1 FROM conversations
    UNION ALL SELECT 'conversations_status', status, 'epoch', 1 FROM conversations
    UNION ALL SELECT 'tool_calls', tool_name, date_trunc('hour', created_at AT TIME ZONE 'UTC'), 1 FROM tool_calls
    UNION ALL SELECT 'tool_status', status || '|' || tool_name, 'epoch', 1 FROM tool_calls
    UNION ALL SELECT 'tool_agent', coalesce(r.agent_slug, ''), 'epoch', 1 FROM tool_calls t LEFT JOIN agent_runs r ON r.id = t.run_id
    UNION ALL SELECT 'feedback', rating, 'epoch', 1 FROM message_feedbacks
) x GROUP BY metric, category, bucket;

-- The dashboard's conversation list and activity windows.
CREATE INDEX conversations_updated ON conversations (updated_at DESC);

-- dashboard_compact folds the backends' rows into shard 0 (the dispatcher's
-- sweep calls it), so that the rows per key stay few however many
-- connections have come and gone. Rows a running transaction is writing are
-- skipped (SKIP LOCKED) and folded next time; only compactions write shard
-- 0, in key order. Returns the number of rows folded.
CREATE FUNCTION dashboard_compact() RETURNS bigint LANGUAGE sql AS $$
    WITH moved AS (
        DELETE FROM dashboard_rollups WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM dashboard_rollups WHERE shard <> 0 FOR UPDATE SKIP LOCKED))
        RETURNING metric, category, bucket, n
    ), folded AS (
        INSERT INTO dashboard_rollups (metric, category, bucket, shard, n)
        SELECT metric, category, bucket, 0, sum(n) FROM moved GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (metric, bucket, category, shard) DO UPDATE SET n = dashboard_rollups.n + EXCLUDED.n
    )
    SELECT count(*) FROM moved
$$;
