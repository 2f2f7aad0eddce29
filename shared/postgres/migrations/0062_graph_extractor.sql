-- The graph extractor of a knowledge base (owned by shared/graph: Builder).
-- A knowledge base without a row builds no graph. Changing the model or the
-- schema resets the graph (its entities were extracted under other rules);
-- version counts the resets, so that an extraction started under an older
-- configuration does not mark chunks done for the new one.
CREATE TABLE graph_extractor_configs (
    kb_id           text PRIMARY KEY,
    llm_model_spec  text NOT NULL,
    entity_types    text[] NOT NULL DEFAULT '{}',
    relation_types  text[] NOT NULL DEFAULT '{}',
    concurrency     int NOT NULL DEFAULT 4 CHECK (concurrency BETWEEN 1 AND 32),
    version         bigint NOT NULL DEFAULT 1,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
