-- Per-chunk progress of graph extraction (owned by shared/graph: Extractor).
-- Chunk ids are content-addressed, so a row with status 'done' means "this
-- exact content was extracted": re-indexing a file extracts only chunks whose
-- content changed, and a redelivered or resumed extraction skips done chunks.
CREATE TABLE graph_chunk_extractions (
    kb_id       text NOT NULL,
    chunk_id    text NOT NULL,
    file_id     text NOT NULL,
    status      text NOT NULL CHECK (status IN ('done', 'failed')),
    attempts    int NOT NULL DEFAULT 1,
    error       text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kb_id, chunk_id)
);
CREATE INDEX graph_chunk_extractions_file ON graph_chunk_extractions (kb_id, file_id);
