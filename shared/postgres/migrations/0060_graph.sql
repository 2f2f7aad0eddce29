-- Knowledge graph of knowledge bases (the embedded engine of shared/graph,
-- which owns these tables). Entities and relations have stable ids derived
-- from their content (see shared/graph: EntityID, RelationID), so a
-- redelivered or repeated extraction writes the same rows. Mentions tie them
-- to the chunks that stated them; an entity or relation lives exactly as long
-- as some chunk mentions it.
--
-- No foreign key to knowledge_bases: the graph is an engine behind an
-- interface (Neo4j holds the same model); deleting a knowledge base calls
-- the engine's DeleteKB.

CREATE TABLE graph_entities (
    kb_id        text NOT NULL,
    entity_id    text NOT NULL,
    name         text NOT NULL,
    label        text NOT NULL,
    description  text NOT NULL DEFAULT '',
    PRIMARY KEY (kb_id, entity_id)
);
CREATE INDEX graph_entities_label ON graph_entities (kb_id, label);
CREATE INDEX graph_entities_name ON graph_entities (kb_id, lower(name) text_pattern_ops);

CREATE TABLE graph_relations (
    kb_id        text NOT NULL,
    relation_id  text NOT NULL,
    source_id    text NOT NULL,
    target_id    text NOT NULL,
    type         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    PRIMARY KEY (kb_id, relation_id)
);
-- 2-hop expansion walks edges from both ends.
CREATE INDEX graph_relations_source ON graph_relations (kb_id, source_id);
CREATE INDEX graph_relations_target ON graph_relations (kb_id, target_id);

-- A chunk mentions an entity (the endpoints of every relation it states are
-- mentioned too).
CREATE TABLE graph_entity_mentions (
    kb_id      text NOT NULL,
    chunk_id   text NOT NULL,
    entity_id  text NOT NULL,
    file_id    text NOT NULL,
    PRIMARY KEY (kb_id, chunk_id, entity_id)
);
CREATE INDEX graph_entity_mentions_entity ON graph_entity_mentions (kb_id, entity_id);
CREATE INDEX graph_entity_mentions_file ON graph_entity_mentions (kb_id, file_id);

CREATE TABLE graph_relation_mentions (
    kb_id        text NOT NULL,
    chunk_id     text NOT NULL,
    relation_id  text NOT NULL,
    file_id      text NOT NULL,
    PRIMARY KEY (kb_id, chunk_id, relation_id)
);
CREATE INDEX graph_relation_mentions_relation ON graph_relation_mentions (kb_id, relation_id);
CREATE INDEX graph_relation_mentions_file ON graph_relation_mentions (kb_id, file_id);
