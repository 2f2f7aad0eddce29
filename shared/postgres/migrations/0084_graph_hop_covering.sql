-- Graph retrieval's hop (shared/graph, Postgres.ExpandIDs) reads each
-- relation's id and both ends: with the other end in the index, a pruned
-- hop is an index-only scan (once VACUUM has marked the pages all-visible,
-- which graph.Settle does after a build) instead of a heap fetch per
-- relation. Same names and keys as 0083, one included column.
DROP INDEX graph_relations_source;
CREATE INDEX graph_relations_source ON graph_relations (kb_id, source_id, relation_id) INCLUDE (target_id);
DROP INDEX graph_relations_target;
CREATE INDEX graph_relations_target ON graph_relations (kb_id, target_id, relation_id) INCLUDE (source_id);
