-- MCP servers (owner: shared/mcp). Admin-configured remote servers reached over
-- streamable_http or sse; stdio exists only for code-defined built-ins and is
-- never stored from the API. Headers are sealed with YUXI_ENCRYPTION_KEY
-- (shared/secret) and never returned; header_names lets the UI show which are set.
CREATE TABLE mcp_servers (
    slug              text PRIMARY KEY CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    name              text NOT NULL,
    description       text NOT NULL DEFAULT '',
    transport         text NOT NULL CHECK (transport IN ('streamable_http', 'sse')),
    url               text NOT NULL,
    headers_sealed    text NOT NULL DEFAULT '',
    header_names      jsonb NOT NULL DEFAULT '[]',
    timeout_s         integer,
    sse_read_timeout_s integer,
    tags              jsonb NOT NULL DEFAULT '[]',
    icon              text NOT NULL DEFAULT '',
    enabled           boolean NOT NULL DEFAULT true,
    disabled_tools    jsonb NOT NULL DEFAULT '[]',
    -- config_hash covers what decides the tool list (transport, url, headers,
    -- timeouts); tools_cache is valid while tools_cache_hash equals it.
    config_hash       text NOT NULL,
    tools_cache       jsonb,
    tools_cache_hash  text,
    tools_fetched_at  timestamptz,
    created_by        text NOT NULL DEFAULT '',
    updated_by        text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- The executable tools of a run, fixed at its first step (write-once): every
-- tool with the sha256 of its definition, and the MCP servers they came from
-- with their config hash. Later steps and tool-invoke read it, so a server's
-- tool list changing mid-run does not change what the run may call.
CREATE TABLE run_tool_manifests (
    run_id       text PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    manifest     jsonb NOT NULL,
    fingerprint  text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
