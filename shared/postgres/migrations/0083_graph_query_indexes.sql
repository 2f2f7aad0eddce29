-- Graph retrieval at scale (shared/graph, Postgres engine): a pruned
-- expansion takes each node's first relations by id (an ordered index scan
-- with LIMIT, not a sort of a hub's thousands of edges), and chunks are
-- ranked from the mentions of the subgraph's entities with index-only scans.
-- Same names as the indexes they replace (0060_graph.sql), one more column.
DROP INDEX graph_relations_source;
CREATE INDEX graph_relations_source ON graph_relations (kb_id, source_id, relation_id);
DROP INDEX graph_relations_target;
CREATE INDEX graph_relations_target ON graph_relations (kb_id, target_id, relation_id);
DROP INDEX graph_entity_mentions_entity;
CREATE INDEX graph_entity_mentions_entity ON graph_entity_mentions (kb_id, entity_id, chunk_id);
