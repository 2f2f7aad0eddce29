-- Graph retrieval at scale (shared/graph, Postgres engine): the graph's ids
-- (content hashes such as ent_…, rel_…, and the ids of knowledge bases,
-- chunks and files) compare byte by byte. Under the database's default
-- collation every index comparison went through the C library's strcoll
-- (PostgreSQL 15 treats only "C" and "POSIX" as plain byte order, not
-- C.UTF-8): a pruned hop's hundreds of index descents and the mention
-- ranking's index scans spent a sixth to a fifth of their time there
-- (figure 19). Byte order is the order the engine already expects (Go's
-- string order; the ids are ASCII), so no ordering changes. Names, labels,
-- types and descriptions keep the default collation. Rewrites the four
-- tables and rebuilds their indexes.
ALTER TABLE graph_entities
    ALTER COLUMN kb_id TYPE text COLLATE "C",
    ALTER COLUMN entity_id TYPE text COLLATE "C";
ALTER TABLE graph_relations
    ALTER COLUMN kb_id TYPE text COLLATE "C",
    ALTER COLUMN relation_id TYPE text COLLATE "C",
    ALTER COLUMN source_id TYPE text COLLATE "C",
    ALTER COLUMN target_id TYPE text COLLATE "C";
ALTER TABLE graph_entity_mentions
    ALTER COLUMN kb_id TYPE text COLLATE "C",
    ALTER COLUMN chunk_id TYPE text COLLATE "C",
    ALTER COLUMN entity_id TYPE text COLLATE "C",
    ALTER COLUMN file_id TYPE text COLLATE "C";
ALTER TABLE graph_relation_mentions
    ALTER COLUMN kb_id TYPE text COLLATE "C",
    ALTER COLUMN chunk_id TYPE text COLLATE "C",
    ALTER COLUMN relation_id TYPE text COLLATE "C",
    ALTER COLUMN file_id TYPE text COLLATE "C";
