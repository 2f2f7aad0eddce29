-- Keyword (BM25) indexes, one per knowledge base (index_id = kb_id), written
-- by shared/keyword inside the transactions that change chunks and searched
-- from a per-process cache. See shared/keyword for the contracts.
--
-- Rows refer to an index and its documents by small integers (index_no,
-- doc_no) rather than by their text ids: the postings table holds one row per
-- (document, distinct term), so every byte of its key counts.

CREATE TABLE keyword_indexes (
    index_id     text PRIMARY KEY,
    index_no     integer GENERATED ALWAYS AS IDENTITY UNIQUE,
    -- BM25 statistics: live documents, sum of their lengths (in terms), and
    -- the number of postings (sizes the cache before loading).
    n_docs       bigint NOT NULL DEFAULT 0 CHECK (n_docs >= 0),
    total_len    bigint NOT NULL DEFAULT 0 CHECK (total_len >= 0),
    n_postings   bigint NOT NULL DEFAULT 0 CHECK (n_postings >= 0),
    -- Bumped by every change; caches compare it on each search.
    version      bigint NOT NULL DEFAULT 0,
    -- Document numbers are handed out in commit order and never reused, so a
    -- cache at version v catches up by loading doc_no >= its next_doc_no.
    next_doc_no  integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per document (chunk). terms is the document's term vector: its
-- distinct terms and their frequencies (encoding in shared/keyword/vector.go).
-- It makes removal exact and cheap (delete the document's postings by primary
-- key, no secondary index on postings) and lets a cache load an index with
-- one row per document.
CREATE TABLE keyword_docs (
    index_no  integer NOT NULL REFERENCES keyword_indexes (index_no) ON DELETE CASCADE,
    doc_id    text COLLATE "C" NOT NULL,
    doc_no    integer NOT NULL,
    length    integer NOT NULL CHECK (length >= 0),
    terms     bytea NOT NULL,
    PRIMARY KEY (index_no, doc_id),
    UNIQUE (index_no, doc_no)
);

-- The inverted index: one row per (term, document). It serves SQL-side search
-- for indexes too large for a process's cache. No foreign key: a check per
-- posting would double the cost of indexing; shared/keyword keeps postings and
-- documents consistent inside one transaction.
CREATE TABLE keyword_postings (
    index_no  integer NOT NULL,
    term      text COLLATE "C" NOT NULL,
    doc_no    integer NOT NULL,
    tf        integer NOT NULL CHECK (tf > 0),
    PRIMARY KEY (index_no, term, doc_no)
);

-- Documents removed (or replaced) at a version, so that caches catch up
-- without reloading. Pruned after 1024 versions; an older cache reloads.
CREATE TABLE keyword_deleted (
    index_no  integer NOT NULL,
    version   bigint NOT NULL,
    doc_no    integer NOT NULL,
    PRIMARY KEY (index_no, version, doc_no)
);
