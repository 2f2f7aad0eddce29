-- keyword_docs loses its foreign key to keyword_indexes: a chunk commit
-- copies one keyword_docs row per new chunk, and the key's check (a trigger
-- and a lookup per row, queued until the end of the COPY) cost a noticeable
-- share of it. Like keyword_blocks and keyword_deleted, which never had one,
-- the rows are kept consistent by shared/keyword alone: a document is only
-- inserted under the index row's lock (Apply), and DropIndex deletes an
-- index's documents explicitly before its row (no ON DELETE CASCADE needed).
ALTER TABLE keyword_docs DROP CONSTRAINT keyword_docs_index_no_fkey;
