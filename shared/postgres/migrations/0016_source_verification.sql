-- A bucket bound to a knowledge base must be proved before its notifications
-- reach the KB: the binder writes verify_token to the source's verification
-- object (which needs write access to the bucket) and asks the platform to
-- check it. Until verified_at is set, notifications for the bucket skip the
-- binding, so binding someone else's bucket ingests nothing. Bindings made
-- before this check start unverified. Owned by shared/kb.
ALTER TABLE knowledge_sources ADD COLUMN verify_token text, ADD COLUMN verified_at timestamptz;
UPDATE knowledge_sources SET verify_token = md5(random()::text || id::text) || md5(random()::text || kb_id);
ALTER TABLE knowledge_sources ALTER COLUMN verify_token SET NOT NULL;
