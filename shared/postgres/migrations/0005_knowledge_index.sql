-- Embeddings are cached by (model, content hash): unchanged chunks are never
-- re-embedded, identical content is embedded once, and an indexing run that
-- crashed resumes without paying again for the batches it finished.
CREATE TABLE embedding_cache (
    model         text NOT NULL,
    content_hash  text NOT NULL,
    dim           int NOT NULL,
    vec           bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, content_hash)
);

-- Vector deletions owed to the vector store, written in the transaction that
-- removed the chunks and applied after commit (an outbox for vectors): a
-- crash between the two leaves a row here for the sweep, never an orphan.
CREATE TABLE knowledge_vector_deletes (
    kb_id       text NOT NULL,
    chunk_id    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kb_id, chunk_id)
);
