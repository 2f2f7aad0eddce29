-- Knowledge bases: document KBs, their files (with the ingestion status
-- machine), bucket bindings, chunks and extracted images. The keyword index
-- and the embedded vector store keep their own tables (later migrations).

CREATE TABLE knowledge_bases (
    id                    bigserial PRIMARY KEY,
    kb_id                 text NOT NULL UNIQUE,
    name                  text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    description           text NOT NULL DEFAULT '',
    kb_type               text NOT NULL DEFAULT 'milvus' CHECK (kb_type IN ('milvus')),
    embedding_model_spec  text NOT NULL,
    embedding_dim         int NOT NULL CHECK (embedding_dim > 0),
    llm_model_spec        text,
    query_params          jsonb NOT NULL DEFAULT '{"options": {}}',
    additional_params     jsonb NOT NULL DEFAULT '{}',
    share_config          jsonb,
    created_by            text NOT NULL,
    -- Bumped whenever the KB's chunks change, so that search caches can tell.
    index_version         bigint NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- A bucket (and key prefix) whose objects are ingested into a KB when bucket
-- notifications arrive (S3, MinIO, GCS).
CREATE TABLE knowledge_sources (
    id          bigserial PRIMARY KEY,
    kb_id       text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    provider    text NOT NULL CHECK (provider IN ('s3', 'gcs')),
    bucket      text NOT NULL,
    prefix      text NOT NULL DEFAULT '',
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kb_id, provider, bucket, prefix)
);
CREATE INDEX knowledge_sources_bucket ON knowledge_sources (provider, bucket);

CREATE TABLE knowledge_files (
    id                 bigserial PRIMARY KEY,
    file_id            text NOT NULL UNIQUE,
    kb_id              text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    parent_id          text,
    filename           text NOT NULL,
    original_filename  text NOT NULL,
    file_type          text NOT NULL DEFAULT '',
    -- Where the original lives in the object store, and its parsed Markdown.
    object_key         text,
    markdown_key       text,
    content_hash       text,
    file_size          bigint,
    content_type       text,
    status             text NOT NULL CHECK (status IN ('uploaded', 'parsing', 'parsed', 'error_parsing', 'indexing', 'indexed', 'error_indexing')),
    error_message      text,
    chunk_count        int NOT NULL DEFAULT 0,
    token_count        int NOT NULL DEFAULT 0,
    processing_params  jsonb NOT NULL DEFAULT '{}',
    is_folder          boolean NOT NULL DEFAULT false,
    -- upload | bucket; for bucket files the object URI and its version (etag or generation).
    source             text NOT NULL DEFAULT 'upload',
    source_uri         text,
    source_version     text,
    -- A stage (parsing, indexing) in progress: when it started, how often it was tried.
    stage_started_at   timestamptz,
    stage_attempts     int NOT NULL DEFAULT 0,
    created_by         text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_files_tree ON knowledge_files (kb_id, parent_id, is_folder, filename);
CREATE INDEX knowledge_files_stage ON knowledge_files (status, stage_started_at) WHERE status IN ('uploaded', 'parsing', 'parsed', 'indexing');
CREATE UNIQUE INDEX knowledge_files_content ON knowledge_files (kb_id, content_hash) WHERE NOT is_folder AND content_hash IS NOT NULL AND source = 'upload';
CREATE UNIQUE INDEX knowledge_files_source ON knowledge_files (kb_id, source_uri) WHERE source_uri IS NOT NULL;

-- Chunk ids are derived from the file and the chunk's content (not its
-- position), so re-indexing unchanged content keeps them.
CREATE TABLE knowledge_chunks (
    chunk_id        text PRIMARY KEY,
    kb_id           text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    file_id         text NOT NULL REFERENCES knowledge_files (file_id) ON DELETE CASCADE,
    chunk_index     int NOT NULL,
    content         text NOT NULL,
    content_hash    text NOT NULL,
    token_count     int NOT NULL,
    start_char_pos  int,
    end_char_pos    int,
    metadata        jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_chunks_file ON knowledge_chunks (file_id, chunk_index);
CREATE INDEX knowledge_chunks_kb ON knowledge_chunks (kb_id);

-- Images extracted while parsing, stored privately and served through an
-- authorised route.
CREATE TABLE knowledge_images (
    kb_id         text NOT NULL REFERENCES knowledge_bases (kb_id) ON DELETE CASCADE,
    file_id       text NOT NULL REFERENCES knowledge_files (file_id) ON DELETE CASCADE,
    object_key    text NOT NULL,
    content_type  text NOT NULL,
    size          bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kb_id, object_key)
);
