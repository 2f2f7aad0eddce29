-- Read-only connector knowledge bases (kb_type 'dify', 'notion'): their public
-- connection parameters live in additional_params; the token is sealed with
-- YUXI_ENCRYPTION_KEY (shared/secret) in connector_secret and never returned.
-- They hold no files and no vectors, so embedding_dim may be 0.
ALTER TABLE knowledge_bases DROP CONSTRAINT knowledge_bases_kb_type_check;
ALTER TABLE knowledge_bases ADD CONSTRAINT knowledge_bases_kb_type_check CHECK (kb_type IN ('milvus', 'dify', 'notion'));
ALTER TABLE knowledge_bases DROP CONSTRAINT knowledge_bases_embedding_dim_check;
ALTER TABLE knowledge_bases ADD CONSTRAINT knowledge_bases_embedding_dim_check
    CHECK (embedding_dim > 0 OR (kb_type <> 'milvus' AND embedding_dim = 0));
ALTER TABLE knowledge_bases ADD COLUMN connector_secret text;
