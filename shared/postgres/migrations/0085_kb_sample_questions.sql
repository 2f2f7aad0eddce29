-- Sample questions of knowledge bases (shared/kbassist owns this table): the
-- questions the original keeps in knowledge_bases.sample_questions, made by a
-- chat model from the knowledge base's files and shown as query examples.
CREATE TABLE kb_sample_questions (
    kb_id       text PRIMARY KEY REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    questions   jsonb NOT NULL,
    model       text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now()
);
