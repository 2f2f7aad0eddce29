-- Skills (owner: shared/skill). Shared and built-in skills: the index here,
-- their files in the object store under skills/<slug>/…. Personal skills
-- live in their user's workspace (agents/skills/<slug>) and are not indexed.
CREATE TABLE skills (
    slug               text PRIMARY KEY CHECK (slug ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND length(slug) <= 128),
    name               text NOT NULL,
    description        text NOT NULL,
    source_type        text NOT NULL CHECK (source_type IN ('builtin', 'upload', 'remote')),
    tool_dependencies  jsonb NOT NULL DEFAULT '[]',
    mcp_dependencies   jsonb NOT NULL DEFAULT '[]',
    skill_dependencies jsonb NOT NULL DEFAULT '[]',
    version            text NOT NULL DEFAULT '',
    content_hash       text NOT NULL DEFAULT '',
    share_config       jsonb,
    enabled            boolean NOT NULL DEFAULT true,
    created_by         text NOT NULL DEFAULT '',
    updated_by         text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Install drafts: an upload or a remote source parsed and staged (files in
-- the object store under skill-drafts/<id>/…) until its creator confirms
-- (shared: an admin; personal: the user) or discards it.
CREATE TABLE skill_drafts (
    id          text PRIMARY KEY,
    created_by  text NOT NULL,
    source_type text NOT NULL CHECK (source_type IN ('upload', 'remote')),
    source      text NOT NULL DEFAULT '',
    items       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX skill_drafts_expires ON skill_drafts (expires_at);

-- The skills a run may use, fixed at its first step (write-once): the
-- agent's context.skills with their skill_dependencies closure, filtered by
-- the user's access, each with its tool and MCP dependencies and content
-- hash. Later steps and tool-invoke read it.
CREATE TABLE run_skills (
    run_id      text PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    snapshot    jsonb NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
