-- Knowledge bases deleted whose vector collection and stored objects are still
-- owed (an outbox for the purge): written in the transaction that deletes the
-- KB's rows, removed once both are gone. A crash between the commit and the
-- purge leaves the row for the dispatcher's sweep, never an orphaned
-- collection or object.
CREATE TABLE knowledge_base_purges (
    kb_id          text PRIMARY KEY,
    object_prefix  text NOT NULL,
    attempts       int NOT NULL DEFAULT 0,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
