// Package graph is the knowledge graph of knowledge bases: entities and
// relations extracted from chunks, the chunks that mention them, and the
// queries the graph routes and graph retrieval need (2-hop expansion,
// labels, stats).
//
// Storage is an Engine. The embedded engine is PostgreSQL (Postgres, tables
// of migration 0060_graph.sql, owned by this package); the Neo4j engine
// (shared/graph/neo4j) implements the same interface and runs the same
// contract suite (shared/graph/graphtest). ExpandBFS is the expansion both
// use; ExternalCleaner removes deleted files' graph from an engine outside
// PostgreSQL.
//
// Ids are derived from content, never from positions or sequences:
// EntityID(name, label) and RelationID(source, type, target). Writing the
// same extraction twice is a no-op, and two chunks (or files) that state the
// same fact share its row. An entity or relation exists exactly as long as
// some chunk mentions it: removing a file's chunks removes their mentions and
// then only the entities and relations nothing else mentions.
//
// Extractor (extract.go) fills the graph from chunks with a chat model:
// fixed prompt plus the knowledge base's entity/relation schema, bounded
// concurrency, per-chunk progress in graph_chunk_extractions (migration
// 0061), so redelivery and re-indexing extract only chunks not yet done.
//
// Service (service.go) is the use cases of the /api/graph/* routes; it
// checks read access through the knowledge-base library before any read.
//
// Builder (build.go) is the kb-graph function's use case — on
// io.yuxi.document.indexed.v1 it extracts a file's changed chunks with the
// knowledge base's configured extractor (graph_extractor_configs, migration
// 0062) — and the graph-build routes' (config, status, index, reset,
// failed chunks). Deleting files or a knowledge base removes their graph in
// the deleting transaction (Postgres.RemoveFilesTx/RemoveKBTx, installed
// as kb.GraphCleaner); RemoveFilesTx returns the vector ids of the entities
// and triples it removed, which the deletion's cleanup deletes after commit.
//
// Vectors (vectors.go): with a VectorIndex, a build embeds the unique
// entities ("name (label)") and triples ("source type target") of the
// chunks it extracted, keyed by stable ids, and retrieval recalls entities
// by vector as seeds next to those the query names.
//
// Imported by: functions/intake, functions/kb-graph,
// shared/bootstrap/knowledge, shared/graph/graphtest, shared/graph/neo4j
// and tests. May import:
// events, shared/access, shared/failure, shared/kb, shared/llm,
// shared/outbox, shared/postgres, pgx and the standard library.
package graph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
)

// DefaultLabel is the label of an entity the extractor named without a type.
const DefaultLabel = "Entity"

// Entity is a node of the graph.
type Entity struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Relation is a directed, typed edge between two entities (by id).
type Relation struct {
	ID          string `json:"id"`
	Source      string `json:"source"`
	Target      string `json:"target"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// ChunkGraph is what one chunk states: its entities and relations. Every
// relation's endpoints must be among Entities (Build guarantees it).
type ChunkGraph struct {
	ChunkID   string
	FileID    string
	Entities  []Entity
	Relations []Relation
}

// Subgraph is the result of an expansion.
type Subgraph struct {
	Entities  []Entity   `json:"entities"`
	Relations []Relation `json:"relations"`
	// Truncated: a node or edge limit cut the expansion short.
	Truncated bool `json:"truncated"`
}

// Limits bound an expansion; zero fields take the defaults (1000 nodes,
// 5000 edges, no per-node cap).
type Limits struct {
	MaxNodes int
	MaxEdges int
	// PerNode, when set, prunes the expansion for retrieval: each node
	// contributes at most PerNode relations in each direction (the lowest
	// relation ids: deterministic), and frontier nodes are expanded in order
	// only until MaxNodes is reached, so a hub costs PerNode rows instead of
	// its whole neighbourhood. Zero: the exact expansion the graph routes
	// show. An engine that cannot prune may ignore it.
	PerNode int
}

func (l Limits) norm() Limits {
	if l.MaxNodes <= 0 {
		l.MaxNodes = 1000
	}
	if l.MaxEdges <= 0 {
		l.MaxEdges = 5000
	}
	return l
}

// LabelCount is one entity label and how many entities carry it.
type LabelCount struct {
	Label string `json:"label"`
	Count int64  `json:"count"`
}

// Stats summarises a knowledge base's graph.
type Stats struct {
	Entities   int64        `json:"total_nodes"`
	Relations  int64        `json:"total_edges"`
	Chunks     int64        `json:"total_chunks"`
	Files      int64        `json:"total_files"`
	EntityType []LabelCount `json:"entity_types"`
}

// Engine stores knowledge graphs, one per knowledge base (kbID scopes every
// call). Implementations are safe for concurrent use; every write is
// idempotent (safe to redeliver).
type Engine interface {
	// WriteChunks replaces, for each chunk, what it mentions with its
	// extraction (entities and relations are upserted by id; mentions the
	// chunk no longer makes are removed, and so are entities and relations
	// nothing mentions any more).
	WriteChunks(ctx context.Context, kbID string, chunks []ChunkGraph) error
	// RemoveChunks removes the mentions of the given chunks, then the
	// entities and relations nothing else mentions.
	RemoveChunks(ctx context.Context, kbID string, chunkIDs []string) error
	// DeleteFile removes every mention of the file's chunks, then the
	// entities and relations nothing else mentions.
	DeleteFile(ctx context.Context, kbID, fileID string) error
	// DeleteKB removes the knowledge base's whole graph.
	DeleteKB(ctx context.Context, kbID string) error

	// Expand returns the seeds and the entities within depth hops of them
	// (edges followed in both directions), breadth first, with the relations
	// among the returned entities, within limits.
	Expand(ctx context.Context, kbID string, seeds []string, depth int, lim Limits) (Subgraph, error)
	// FindEntities returns entities whose name starts with prefix
	// (case-insensitive) or whose label equals it; "" or "*" returns the
	// most mentioned entities. At most limit, most mentioned first.
	FindEntities(ctx context.Context, kbID, prefix string, limit int) ([]Entity, error)
	// EntitiesNamed returns entities whose normalized name (Normalize) is
	// one of names, any label, longest name first (ties by id), at most
	// limit — graph retrieval's recall of the entities a query names.
	EntitiesNamed(ctx context.Context, kbID string, names []string, limit int) ([]Entity, error)
	// Mentions returns, for each given entity, the chunks that mention it.
	Mentions(ctx context.Context, kbID string, entityIDs []string) (map[string][]string, error)
	// ChunkEntities returns, for each given chunk, the entities it mentions.
	ChunkEntities(ctx context.Context, kbID string, chunkIDs []string) (map[string][]string, error)
	// Labels returns the distinct entity labels, sorted.
	Labels(ctx context.Context, kbID string) ([]string, error)
	// Stats counts the graph.
	Stats(ctx context.Context, kbID string) (Stats, error)
}

// Normalize folds a name for identity: trimmed, inner whitespace collapsed,
// lower-cased.
func Normalize(name string) string {
	return strings.ToLower(strings.Join(strings.FieldsFunc(name, unicode.IsSpace), " "))
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// EntityID is the stable id of the entity named name with label label (as
// the original: unique by normalized name and label).
func EntityID(name, label string) string {
	if strings.TrimSpace(label) == "" {
		label = DefaultLabel
	}
	return "ent_" + digest(Normalize(name), Normalize(label))
}

// RelationID is the stable id of a relation between two entity ids.
func RelationID(source, typ, target string) string {
	return "rel_" + digest(source, Normalize(typ), target)
}

// Extracted is one chunk's extraction as a model returns it: entities by
// name, relations between names.
type Extracted struct {
	Entities  []ExtractedEntity   `json:"entities"`
	Relations []ExtractedRelation `json:"relations"`
}

// ExtractedEntity is an entity as the extractor names it.
type ExtractedEntity struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// ExtractedRelation is a relation between two entity names.
type ExtractedRelation struct {
	Source      string `json:"source"`
	Target      string `json:"target"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// Build turns an extraction into the chunk's graph: ids derived from
// content, duplicates merged, empty names dropped, and relation endpoints
// resolved to the chunk's entities by normalized name (an endpoint the
// extractor did not list becomes an entity of DefaultLabel).
func Build(chunkID, fileID string, x Extracted) ChunkGraph {
	g := ChunkGraph{ChunkID: chunkID, FileID: fileID}
	byName := map[string]string{} // normalized name → entity id
	seen := map[string]bool{}
	add := func(name, label, desc string) string {
		name = strings.TrimSpace(name)
		label = strings.TrimSpace(label)
		if label == "" {
			label = DefaultLabel
		}
		id := EntityID(name, label)
		if !seen[id] {
			seen[id] = true
			g.Entities = append(g.Entities, Entity{ID: id, Name: name, Label: label, Description: strings.TrimSpace(desc)})
		}
		if _, ok := byName[Normalize(name)]; !ok {
			byName[Normalize(name)] = id
		}
		return id
	}
	for _, e := range x.Entities {
		if Normalize(e.Name) != "" {
			add(e.Name, e.Type, e.Description)
		}
	}
	rseen := map[string]bool{}
	for _, r := range x.Relations {
		if Normalize(r.Source) == "" || Normalize(r.Target) == "" || strings.TrimSpace(r.Type) == "" {
			continue
		}
		src, ok := byName[Normalize(r.Source)]
		if !ok {
			src = add(r.Source, "", "")
		}
		dst, ok := byName[Normalize(r.Target)]
		if !ok {
			dst = add(r.Target, "", "")
		}
		id := RelationID(src, r.Type, dst)
		if rseen[id] {
			continue
		}
		rseen[id] = true
		g.Relations = append(g.Relations, Relation{ID: id, Source: src, Target: dst, Type: strings.TrimSpace(r.Type), Description: strings.TrimSpace(r.Description)})
	}
	return g
}
