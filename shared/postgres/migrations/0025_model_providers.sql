-- Model providers managed through /api/system/model-providers, next to the
-- ones configured by environment (which are never stored here). Owned by
-- shared/modelprovider. The API key and the extra request headers are sealed
-- with YUXI_ENCRYPTION_KEY (shared/secret); they are never answered.
-- Processes cache the rows and reload them when the Redis version key moves.
CREATE TABLE model_providers (
    id                        bigserial   PRIMARY KEY,
    provider_id               text        NOT NULL UNIQUE,
    display_name              text        NOT NULL,
    provider_type             text        NOT NULL DEFAULT 'openai',
    default_protocol          text,
    base_url                  text        NOT NULL,
    embedding_base_url        text,
    rerank_base_url           text,
    models_endpoint           text,
    embedding_models_endpoint text,
    rerank_models_endpoint    text,
    api_key_sealed            text,
    headers_sealed            text,
    capabilities              jsonb       NOT NULL DEFAULT '["chat"]',
    enabled_models            jsonb       NOT NULL DEFAULT '[]',
    extra_json                jsonb       NOT NULL DEFAULT '{}',
    is_enabled                boolean     NOT NULL DEFAULT true,
    created_by                text,
    updated_by                text,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);
