// Package neo4j is the scale-out engine of graph.Engine: a Neo4j database
// reached over Bolt with github.com/neo4j/neo4j-go-driver/v5.
//
// The model is the original's: entities are (:Entity) nodes, chunks are
// (:Chunk) nodes with (:Chunk)-[:MENTIONS]->(:Entity) edges, relations are
// (:Entity)-[:RELATION {id, type, description, chunks}]->(:Entity) edges whose
// chunks list says which chunks state them. Every node carries kb_id; nodes
// are merged by (kb_id, id), the stable content-derived ids of shared/graph,
// so a redelivered write is a no-op. Writes send their rows in one
// parameter and UNWIND it (one round trip per statement, not per row).
//
// Deletion removes the chunks' MENTIONS edges and chunk nodes, then only the
// entities those chunks mentioned that no other chunk mentions any more, and
// the relations no chunk states (the original fixed a bug where a file's
// deletion removed every orphan of the knowledge base).
//
// Writes to one knowledge base are serialised, as the Postgres engine's
// advisory lock does, by writing a (:GraphLock {kb_id}) node first: Neo4j
// holds that node's write lock until the transaction ends, so a collection
// of unmentioned entities cannot race a write that is about to mention one.
//
// It is its own package so that a binary links the driver only where it is
// wired (shared/bootstrap/knowledge, YUXI_GRAPH_ENGINE=neo4j).
//
// Imported by: shared/bootstrap/knowledge, its tests. May import:
// shared/graph, the neo4j go driver and the standard library.
package neo4j

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/yuxi-serverless/yuxi/shared/graph"
)

// Config addresses the server (the original's NEO4J_URI, NEO4J_USERNAME,
// NEO4J_PASSWORD).
type Config struct {
	URI      string // bolt://host:7687 or neo4j://host:7687 (routing)
	Username string
	Password string
	Database string // "" is the server's default database
	// Namespace prefixes every stored kb_id: engines with different
	// namespaces share a database without seeing each other's graphs
	// (the contract suite's parallel subtests against one server).
	Namespace string
}

// Engine is graph.Engine over Neo4j. Safe for concurrent use.
type Engine struct {
	driver bolt.DriverWithContext
	db     string
	ns     string
}

var _ graph.Engine = (*Engine)(nil)

// schema is created once at Open, each statement in its own auto-commit
// transaction (Neo4j does not mix schema and data changes).
var schema = []string{
	`CREATE CONSTRAINT yuxi_entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.kb_id, e.id) IS UNIQUE`,
	`CREATE CONSTRAINT yuxi_chunk_key IF NOT EXISTS FOR (c:Chunk) REQUIRE (c.kb_id, c.id) IS UNIQUE`,
	`CREATE CONSTRAINT yuxi_graph_lock IF NOT EXISTS FOR (l:GraphLock) REQUIRE l.kb_id IS UNIQUE`,
	`CREATE INDEX yuxi_chunk_file IF NOT EXISTS FOR (c:Chunk) ON (c.kb_id, c.file_id)`,
	`CREATE INDEX yuxi_entity_name IF NOT EXISTS FOR (e:Entity) ON (e.kb_id, e.name_lower)`,
}

// Open connects, checks the server answers and creates the schema.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.URI == "" {
		return nil, fmt.Errorf("neo4j: no URI")
	}
	drv, err := bolt.NewDriverWithContext(cfg.URI, bolt.BasicAuth(cfg.Username, cfg.Password, ""), func(c *bolt.Config) {
		c.MaxTransactionRetryTime = 15 * time.Second
	})
	if err != nil {
		return nil, fmt.Errorf("neo4j %s: %w", cfg.URI, err)
	}
	e := &Engine{driver: drv, db: cfg.Database, ns: cfg.Namespace}
	if err := drv.VerifyConnectivity(ctx); err != nil {
		_ = drv.Close(ctx)
		return nil, fmt.Errorf("neo4j %s: %w", cfg.URI, err)
	}
	s := e.session(ctx, bolt.AccessModeWrite)
	defer s.Close(ctx)
	for _, q := range schema {
		res, err := s.Run(ctx, q, nil)
		if err == nil {
			_, err = res.Consume(ctx)
		}
		if err != nil {
			_ = drv.Close(ctx)
			return nil, fmt.Errorf("neo4j schema: %w", err)
		}
	}
	return e, nil
}

// Close closes the driver's connections.
func (e *Engine) Close(ctx context.Context) error { return e.driver.Close(ctx) }

func (e *Engine) session(ctx context.Context, mode bolt.AccessMode) bolt.SessionWithContext {
	return e.driver.NewSession(ctx, bolt.SessionConfig{DatabaseName: e.db, AccessMode: mode})
}

// tx runs statements in one managed transaction (retried by the driver on
// transient errors, so fn must only run statements).
type tx struct {
	ctx context.Context
	t   bolt.ManagedTransaction
}

func (t tx) rows(q string, params map[string]any) ([]*bolt.Record, error) {
	res, err := t.t.Run(t.ctx, q, params)
	if err != nil {
		return nil, err
	}
	return res.Collect(t.ctx)
}

func (e *Engine) write(ctx context.Context, kbID string, fn func(t tx) error) error {
	s := e.session(ctx, bolt.AccessModeWrite)
	defer s.Close(ctx)
	_, err := s.ExecuteWrite(ctx, func(mt bolt.ManagedTransaction) (any, error) {
		t := tx{ctx: ctx, t: mt}
		if _, err := t.rows(qLock, map[string]any{"kb": kbID}); err != nil {
			return nil, err
		}
		return nil, fn(t)
	})
	return err
}

func (e *Engine) read(ctx context.Context, fn func(t tx) error) error {
	s := e.session(ctx, bolt.AccessModeRead)
	defer s.Close(ctx)
	_, err := s.ExecuteRead(ctx, func(mt bolt.ManagedTransaction) (any, error) {
		return nil, fn(tx{ctx: ctx, t: mt})
	})
	return err
}

const (
	qLock = `MERGE (l:GraphLock {kb_id: $kb}) SET l.writes = coalesce(l.writes, 0) + 1`

	// qUnstate takes the given chunks out of the chunks list of the
	// relations they state (a relation is stated only between two entities
	// its chunk mentions, so the MENTIONS edges find them by index).
	qUnstate = `UNWIND $chunks AS cid
MATCH (c:Chunk {kb_id: $kb, id: cid})-[:MENTIONS]->(:Entity)-[r:RELATION]->(:Entity)<-[:MENTIONS]-(c)
WHERE cid IN r.chunks
SET r.chunks = [x IN r.chunks WHERE x <> cid]`

	// qUnmention deletes the chunks' nodes and MENTIONS edges and returns
	// the entities they mentioned (the candidates for collection).
	qUnmention = `UNWIND $chunks AS cid
MATCH (c:Chunk {kb_id: $kb, id: cid})
OPTIONAL MATCH (c)-[:MENTIONS]->(e:Entity)
WITH c, collect(e.id) AS ids
DETACH DELETE c
WITH ids UNWIND ids AS id
RETURN DISTINCT id`

	// qCollect deletes, among the candidates, the relations no chunk states
	// and then the entities no chunk mentions (with any edge left).
	qCollect = `UNWIND $entities AS eid
MATCH (e:Entity {kb_id: $kb, id: eid})
OPTIONAL MATCH (e)-[r:RELATION]-(:Entity)
WHERE size(r.chunks) = 0
DELETE r
WITH DISTINCT e
WHERE NOT EXISTS { MATCH (:Chunk)-[:MENTIONS]->(e) }
DETACH DELETE e`

	qMergeEntities = `UNWIND $entities AS row
MERGE (e:Entity {kb_id: $kb, id: row.id})
ON CREATE SET e.name = row.name, e.name_lower = row.name_lower, e.label = row.label, e.description = row.description
ON MATCH SET e.description = CASE WHEN e.description = '' THEN row.description ELSE e.description END`

	qMergeMentions = `UNWIND $mentions AS row
MERGE (c:Chunk {kb_id: $kb, id: row.chunk})
SET c.file_id = row.file
WITH c, row
MATCH (e:Entity {kb_id: $kb, id: row.entity})
MERGE (c)-[:MENTIONS]->(e)`

	qMergeRelations = `UNWIND $relations AS row
MATCH (s:Entity {kb_id: $kb, id: row.source}), (t:Entity {kb_id: $kb, id: row.target})
MERGE (s)-[r:RELATION {id: row.id}]->(t)
ON CREATE SET r.kb_id = $kb, r.type = row.type, r.description = row.description, r.chunks = []
SET r.chunks = CASE WHEN row.chunk IN r.chunks THEN r.chunks ELSE r.chunks + row.chunk END,
    r.description = CASE WHEN r.description = '' THEN row.description ELSE r.description END`

	qFileChunks = `MATCH (c:Chunk {kb_id: $kb, file_id: $file}) RETURN c.id AS id`

	qDeleteKB = `MATCH (n:Chunk|Entity {kb_id: $kb}) DETACH DELETE n`

	entityFields = `e.id AS id, e.name AS name, e.label AS label, e.description AS description`

	qEntities = `UNWIND $ids AS id
MATCH (e:Entity {kb_id: $kb, id: id})
RETURN ` + entityFields

	// qHop is one breadth-first hop: the relations touching the frontier,
	// in both directions.
	qHop = `UNWIND $frontier AS fid
MATCH (:Entity {kb_id: $kb, id: fid})-[r:RELATION]-(:Entity)
RETURN DISTINCT r.id AS id, startNode(r).id AS source, endNode(r).id AS target, r.type AS type, r.description AS description
ORDER BY id`

	qMostMentioned = `MATCH (e:Entity {kb_id: $kb})
WITH e, COUNT { (:Chunk)-[:MENTIONS]->(e) } AS n
ORDER BY n DESC, e.id LIMIT $limit
RETURN ` + entityFields

	qPrefix = `MATCH (e:Entity {kb_id: $kb})
WHERE e.name_lower STARTS WITH $prefix OR e.label = $label
WITH e, COUNT { (:Chunk)-[:MENTIONS]->(e) } AS n
ORDER BY n DESC, e.id LIMIT $limit
RETURN ` + entityFields

	qNamed = `UNWIND $names AS name
MATCH (e:Entity {kb_id: $kb, name_lower: name})
WITH DISTINCT e
ORDER BY size(e.name) DESC, e.id LIMIT $limit
RETURN ` + entityFields

	qMentions = `UNWIND $ids AS eid
MATCH (c:Chunk {kb_id: $kb})-[:MENTIONS]->(e:Entity {kb_id: $kb, id: eid})
RETURN e.id AS k, c.id AS v ORDER BY k, v`

	qChunkEntities = `UNWIND $ids AS cid
MATCH (c:Chunk {kb_id: $kb, id: cid})-[:MENTIONS]->(e:Entity)
RETURN c.id AS k, e.id AS v ORDER BY k, v`

	qLabels = `MATCH (e:Entity {kb_id: $kb}) RETURN DISTINCT e.label AS label ORDER BY label`

	qLabelCounts = `MATCH (e:Entity {kb_id: $kb}) RETURN e.label AS label, count(*) AS n ORDER BY n DESC, label`

	qCounts = `CALL { MATCH (:Entity {kb_id: $kb})-[r:RELATION]->(:Entity) RETURN count(r) AS relations }
CALL { MATCH (c:Chunk {kb_id: $kb}) RETURN count(c) AS chunks, count(DISTINCT c.file_id) AS files }
RETURN relations, chunks, files`
)

// WriteChunks implements graph.Engine: in one transaction, the chunks'
// previous statements are taken back, their extraction merged, and what
// nothing mentions any more collected.
func (e *Engine) WriteChunks(ctx context.Context, kbID string, chunks []graph.ChunkGraph) error {
	kbID = e.ns + kbID
	if len(chunks) == 0 {
		return nil
	}
	var chunkIDs []string
	var ents, mentions, rels []map[string]any
	seenE := map[string]bool{}
	for _, c := range chunks {
		chunkIDs = append(chunkIDs, c.ChunkID)
		mine := map[string]bool{}
		for _, en := range c.Entities {
			if en.ID == "" || mine[en.ID] {
				continue
			}
			mine[en.ID] = true
			mentions = append(mentions, map[string]any{"chunk": c.ChunkID, "file": c.FileID, "entity": en.ID})
			if !seenE[en.ID] {
				seenE[en.ID] = true
				ents = append(ents, map[string]any{"id": en.ID, "name": en.Name, "name_lower": strings.ToLower(en.Name), "label": en.Label, "description": en.Description})
			}
		}
		mineR := map[string]bool{}
		for _, r := range c.Relations {
			if !mine[r.Source] || !mine[r.Target] {
				return fmt.Errorf("chunk %s: relation %s names an entity the chunk does not list", c.ChunkID, r.ID)
			}
			if mineR[r.ID] {
				continue
			}
			mineR[r.ID] = true
			rels = append(rels, map[string]any{"id": r.ID, "source": r.Source, "target": r.Target, "type": r.Type, "description": r.Description, "chunk": c.ChunkID})
		}
	}
	return e.write(ctx, kbID, func(t tx) error {
		gone, err := unmention(t, kbID, chunkIDs)
		if err != nil {
			return err
		}
		for _, st := range []struct {
			q, key string
			rows   []map[string]any
		}{{qMergeEntities, "entities", ents}, {qMergeMentions, "mentions", mentions}, {qMergeRelations, "relations", rels}} {
			if len(st.rows) == 0 {
				continue
			}
			if _, err := t.rows(st.q, map[string]any{"kb": kbID, st.key: st.rows}); err != nil {
				return fmt.Errorf("write graph %s: %w", st.key, err)
			}
		}
		return collect(t, kbID, gone)
	})
}

// unmention takes back what the chunks stated and returns the entities they
// mentioned.
func unmention(t tx, kbID string, chunkIDs []string) ([]string, error) {
	p := map[string]any{"kb": kbID, "chunks": chunkIDs}
	if _, err := t.rows(qUnstate, p); err != nil {
		return nil, fmt.Errorf("unstate relations: %w", err)
	}
	recs, err := t.rows(qUnmention, p)
	if err != nil {
		return nil, fmt.Errorf("remove mentions: %w", err)
	}
	return strs(recs, "id"), nil
}

func collect(t tx, kbID string, entities []string) error {
	if len(entities) == 0 {
		return nil
	}
	if _, err := t.rows(qCollect, map[string]any{"kb": kbID, "entities": entities}); err != nil {
		return fmt.Errorf("collect entities: %w", err)
	}
	return nil
}

// RemoveChunks implements graph.Engine.
func (e *Engine) RemoveChunks(ctx context.Context, kbID string, chunkIDs []string) error {
	kbID = e.ns + kbID
	if len(chunkIDs) == 0 {
		return nil
	}
	return e.write(ctx, kbID, func(t tx) error {
		gone, err := unmention(t, kbID, chunkIDs)
		if err != nil {
			return err
		}
		return collect(t, kbID, gone)
	})
}

// DeleteFile implements graph.Engine: only the file's MENTIONS edges go, and
// only the entities they touched that nothing else mentions.
func (e *Engine) DeleteFile(ctx context.Context, kbID, fileID string) error {
	kbID = e.ns + kbID
	return e.write(ctx, kbID, func(t tx) error {
		recs, err := t.rows(qFileChunks, map[string]any{"kb": kbID, "file": fileID})
		if err != nil {
			return fmt.Errorf("file chunks: %w", err)
		}
		ids := strs(recs, "id")
		if len(ids) == 0 {
			return nil
		}
		gone, err := unmention(t, kbID, ids)
		if err != nil {
			return err
		}
		return collect(t, kbID, gone)
	})
}

// DeleteKB implements graph.Engine.
func (e *Engine) DeleteKB(ctx context.Context, kbID string) error {
	kbID = e.ns + kbID
	return e.write(ctx, kbID, func(t tx) error {
		_, err := t.rows(qDeleteKB, map[string]any{"kb": kbID})
		return err
	})
}

// Expand implements graph.Engine: one query per hop, the limits applied in
// the same breadth-first order as the Postgres engine's.
func (e *Engine) Expand(ctx context.Context, kbID string, seeds []string, depth int, lim graph.Limits) (graph.Subgraph, error) {
	kbID = e.ns + kbID
	var sg graph.Subgraph
	if len(seeds) == 0 {
		return sg, nil
	}
	err := e.read(ctx, func(t tx) error {
		sg = graph.Subgraph{}
		return graph.ExpandBFS(&sg, seeds, depth, lim, func(ids []string) ([]graph.Entity, error) {
			recs, err := t.rows(qEntities, map[string]any{"kb": kbID, "ids": ids})
			return entities(recs), err
		}, func(frontier []string) ([]graph.Relation, error) {
			recs, err := t.rows(qHop, map[string]any{"kb": kbID, "frontier": frontier})
			if err != nil {
				return nil, err
			}
			out := make([]graph.Relation, 0, len(recs))
			for _, r := range recs {
				out = append(out, graph.Relation{ID: str(r, "id"), Source: str(r, "source"), Target: str(r, "target"), Type: str(r, "type"), Description: str(r, "description")})
			}
			return out, nil
		})
	})
	return sg, err
}

// FindEntities implements graph.Engine (STARTS WITH matches literally).
func (e *Engine) FindEntities(ctx context.Context, kbID, prefix string, limit int) ([]graph.Entity, error) {
	kbID = e.ns + kbID
	if limit <= 0 {
		limit = 100
	}
	prefix = strings.TrimSpace(prefix)
	q, p := qMostMentioned, map[string]any{"kb": kbID, "limit": int64(limit)}
	if prefix != "" && prefix != "*" {
		q, p["prefix"], p["label"] = qPrefix, strings.ToLower(prefix), prefix
	}
	return e.entityQuery(ctx, q, p)
}

// EntitiesNamed implements graph.Engine (an index lookup per name).
func (e *Engine) EntitiesNamed(ctx context.Context, kbID string, names []string, limit int) ([]graph.Entity, error) {
	kbID = e.ns + kbID
	if len(names) == 0 {
		return nil, nil
	}
	if limit <= 0 {
		limit = 10
	}
	return e.entityQuery(ctx, qNamed, map[string]any{"kb": kbID, "names": names, "limit": int64(limit)})
}

func (e *Engine) entityQuery(ctx context.Context, q string, p map[string]any) ([]graph.Entity, error) {
	var out []graph.Entity
	err := e.read(ctx, func(t tx) error {
		recs, err := t.rows(q, p)
		out = entities(recs)
		return err
	})
	return out, err
}

// Mentions implements graph.Engine.
func (e *Engine) Mentions(ctx context.Context, kbID string, entityIDs []string) (map[string][]string, error) {
	kbID = e.ns + kbID
	return e.pairs(ctx, qMentions, kbID, entityIDs)
}

// ChunkEntities implements graph.Engine.
func (e *Engine) ChunkEntities(ctx context.Context, kbID string, chunkIDs []string) (map[string][]string, error) {
	kbID = e.ns + kbID
	return e.pairs(ctx, qChunkEntities, kbID, chunkIDs)
}

func (e *Engine) pairs(ctx context.Context, q, kbID string, ids []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(ids) == 0 {
		return out, nil
	}
	err := e.read(ctx, func(t tx) error {
		recs, err := t.rows(q, map[string]any{"kb": kbID, "ids": ids})
		clear(out)
		for _, r := range recs {
			out[str(r, "k")] = append(out[str(r, "k")], str(r, "v"))
		}
		return err
	})
	return out, err
}

// Labels implements graph.Engine.
func (e *Engine) Labels(ctx context.Context, kbID string) ([]string, error) {
	kbID = e.ns + kbID
	out := []string{}
	err := e.read(ctx, func(t tx) error {
		recs, err := t.rows(qLabels, map[string]any{"kb": kbID})
		out = append(out[:0], strs(recs, "label")...)
		return err
	})
	return out, err
}

// Stats implements graph.Engine.
func (e *Engine) Stats(ctx context.Context, kbID string) (graph.Stats, error) {
	kbID = e.ns + kbID
	var s graph.Stats
	err := e.read(ctx, func(t tx) error {
		s = graph.Stats{EntityType: []graph.LabelCount{}}
		p := map[string]any{"kb": kbID}
		recs, err := t.rows(qLabelCounts, p)
		if err != nil {
			return err
		}
		for _, r := range recs {
			n := num(r, "n")
			s.Entities += n
			s.EntityType = append(s.EntityType, graph.LabelCount{Label: str(r, "label"), Count: n})
		}
		// Ties by label, as the Postgres engine (the server sorts too; this
		// keeps the order whatever its collation).
		sort.SliceStable(s.EntityType, func(i, j int) bool {
			a, b := s.EntityType[i], s.EntityType[j]
			return a.Count > b.Count || a.Count == b.Count && a.Label < b.Label
		})
		recs, err = t.rows(qCounts, p)
		if err != nil {
			return err
		}
		if len(recs) == 1 {
			s.Relations, s.Chunks, s.Files = num(recs[0], "relations"), num(recs[0], "chunks"), num(recs[0], "files")
		}
		return nil
	})
	return s, err
}

func entities(recs []*bolt.Record) []graph.Entity {
	out := make([]graph.Entity, 0, len(recs))
	for _, r := range recs {
		out = append(out, graph.Entity{ID: str(r, "id"), Name: str(r, "name"), Label: str(r, "label"), Description: str(r, "description")})
	}
	return out
}

func str(r *bolt.Record, key string) string {
	v, _ := r.Get(key)
	s, _ := v.(string)
	return s
}

func num(r *bolt.Record, key string) int64 {
	v, _ := r.Get(key)
	n, _ := v.(int64)
	return n
}

func strs(recs []*bolt.Record, key string) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, str(r, key))
	}
	return out
}
