-- Keyword postings as blocks: one row per (term, Apply) instead of one row
-- per (term, document). A chunk commit of a large file wrote hundreds of
-- thousands of posting rows, each a heap tuple and a primary-key entry; the
-- same postings now go in as one row per distinct term of the batch (the
-- document numbers of a batch are consecutive, so its blocks never overlap
-- another batch's). Written and read only by shared/keyword (apply.go,
-- search.go): see there for the contracts.
--
-- A block holds the ascending document numbers of the term's postings and
-- their term frequencies, in two arrays of equal length; first_doc is its
-- smallest document number. Blocks of one term never overlap in document
-- numbers, so the block holding (term, doc_no) is the one with the greatest
-- first_doc <= doc_no: removal finds it with one index probe, rewrites the
-- block without the removed documents, and deletes it when it empties.
CREATE TABLE keyword_blocks (
    index_no   integer NOT NULL,
    term       text COLLATE "C" NOT NULL,
    first_doc  integer NOT NULL,
    docs       integer[] NOT NULL,
    tfs        integer[] NOT NULL,
    CHECK (cardinality(docs) > 0 AND cardinality(docs) = cardinality(tfs) AND docs[1] = first_doc),
    PRIMARY KEY (index_no, term, first_doc)
);
-- Document numbers compress poorly and are read whole: store large arrays
-- out of line without spending CPU on compression.
ALTER TABLE keyword_blocks ALTER COLUMN docs SET STORAGE EXTERNAL, ALTER COLUMN tfs SET STORAGE EXTERNAL;
-- The same for the documents' term vectors (a few kB each): pglz spent more
-- CPU in a chunk commit than it saved.
ALTER TABLE keyword_docs ALTER COLUMN terms SET STORAGE EXTERNAL;

INSERT INTO keyword_blocks (index_no, term, first_doc, docs, tfs)
SELECT index_no, term, min(doc_no), array_agg(doc_no ORDER BY doc_no), array_agg(tf ORDER BY doc_no)
FROM keyword_postings GROUP BY index_no, term;

DROP TABLE keyword_postings;
