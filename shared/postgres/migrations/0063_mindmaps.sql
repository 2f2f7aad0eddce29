-- Mind maps of knowledge bases (shared/mindmap owns this table): the tree
-- the original keeps in knowledge_bases.mindmap, the file ids it covers
-- (mindmap_file_ids, for the incremental diff) and how it was made.
CREATE TABLE kb_mindmaps (
    kb_id       text PRIMARY KEY REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    mindmap     jsonb NOT NULL,
    file_ids    text[] NOT NULL DEFAULT '{}',
    metadata    jsonb NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL DEFAULT now()
);
