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

-- Vectors written for chunks not yet committed (kb-index writes a file's
-- vectors before the transaction that commits its chunks). The commit moves
-- the rows it does not keep — vectors of a crashed attempt that chunked
-- differently — to knowledge_vector_deletes, as does deleting the file, so no
-- vector outlives its chunk for good. Recorded before each vector write.
CREATE TABLE knowledge_vector_writes (
    file_id     text NOT NULL REFERENCES knowledge_files (file_id) ON DELETE CASCADE,
    chunk_id    text NOT NULL,
    kb_id       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (file_id, chunk_id)
);
