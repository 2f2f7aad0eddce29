-- Tasks (GET /api/tasks…) are a read model over the work the owning
-- packages already record: ingestion batches in knowledge_files (shared/kb),
-- evaluation runs and generated datasets (shared/evaluation). No second
-- writer of those tables; shared/task owns only the dismissals below.

-- The ingestion batch a file was registered (or restaged) in: its task id,
-- and when that batch was cancelled (a cancelled file starts no further
-- stage; a stage already running finishes). Written by shared/kb only.
ALTER TABLE knowledge_files
    ADD COLUMN ingest_batch        text,
    ADD COLUMN ingest_cancelled_at timestamptz;
CREATE INDEX knowledge_files_batch ON knowledge_files (kb_id, ingest_batch) WHERE ingest_batch IS NOT NULL;

-- DELETE /api/tasks/{task_id}: a finished task's record removed from the
-- task list (the work's own rows — files, runs, datasets — stay theirs).
CREATE TABLE task_dismissals (
    task_id      text PRIMARY KEY,
    dismissed_by text NOT NULL,
    dismissed_at timestamptz NOT NULL DEFAULT now()
);
