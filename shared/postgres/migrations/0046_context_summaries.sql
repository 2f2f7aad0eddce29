-- Context compression summaries (owner: shared/compaction). A summary (L2)
-- replaces a thread's transcript up to and including upto_message_id in the
-- model's effective context; stored messages are never changed. One per
-- (run, step): the summary turn is checkpointed, so a retried step reuses it.
CREATE TABLE context_summaries (
    id               bigserial PRIMARY KEY,
    conversation_id  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    run_id           text NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    step_no          int NOT NULL,
    upto_message_id  bigint NOT NULL,
    content          text NOT NULL,
    tokens_before    int NOT NULL,
    tokens_after     int NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, step_no)
);
CREATE INDEX context_summaries_conversation ON context_summaries (conversation_id, id DESC);
