-- Generated benchmark datasets are built in checkpointed batches like runs:
-- generation_batch is the first batch not yet committed (a redelivered
-- batch finds it moved on), generation_attempt counts resumes (one resume
-- wins each failed generation; concurrent resumes share its job).
ALTER TABLE evaluation_datasets
    ADD COLUMN generation_batch   int NOT NULL DEFAULT 0,
    ADD COLUMN generation_attempt int NOT NULL DEFAULT 0;
