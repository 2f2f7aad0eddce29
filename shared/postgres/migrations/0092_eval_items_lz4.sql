-- An evaluation item's retrieved_chunks (its top chunks with their text,
-- about 20 kB of JSON at final_top_k 10) is TOASTed on every insert: with the
-- default pglz its compression was most of a batch commit's database CPU
-- (figure 18). lz4 compresses it several times faster at a similar ratio.
-- Only new values are compressed so (no table rewrite); a server built
-- without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE evaluation_run_items ALTER COLUMN retrieved_chunks SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 not supported by this server: evaluation_run_items.retrieved_chunks keeps pglz';
END
$$;
