package graph

import (
	"context"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// KBs is what the graph routes need of the knowledge bases: read access to
// one (kb.Library.KB: refuses a KB not shared with the subject) and the list
// the subject may read (kb.Store.List).
type KBs interface {
	KB(ctx context.Context, sub access.Subject, kbID string) (kb.KB, error)
	List(ctx context.Context, sub access.Subject) ([]kb.KB, error)
}

// Service is the use cases of the /api/graph/* routes.
type Service struct {
	Engine Engine
	KBs    KBs
}

// GraphInfo is one entry of List (the original's /api/graph/list shape).
type GraphInfo struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
}

// graphCapable: native knowledge bases carry a graph; read-only connectors
// (dify, notion) do not.
func graphCapable(k kb.KB) bool {
	t := strings.ToLower(k.KBType)
	return t != "dify" && t != "notion"
}

// List returns the knowledge bases with graph capability the subject reads.
func (s *Service) List(ctx context.Context, sub access.Subject) ([]GraphInfo, error) {
	list, err := s.KBs.List(ctx, sub)
	if err != nil {
		return nil, err
	}
	out := []GraphInfo{}
	for _, k := range list {
		if graphCapable(k) {
			out = append(out, GraphInfo{ID: k.KBID, Name: k.Name, Type: k.KBType, Description: k.Description, Status: "active", CreatedAt: k.CreatedAt})
		}
	}
	return out, nil
}

func (s *Service) readable(ctx context.Context, sub access.Subject, kbID string) error {
	if strings.TrimSpace(kbID) == "" {
		return failure.Invalid("kb_id_required", "kb_id is required")
	}
	k, err := s.KBs.KB(ctx, sub, kbID)
	if err != nil {
		return err
	}
	if !graphCapable(k) {
		return failure.NotFound("graph_unsupported", "knowledge base %s (%s) has no graph", kbID, k.KBType)
	}
	return nil
}

// SubgraphQuery is the query of /api/graph/subgraph.
type SubgraphQuery struct {
	KBID      string
	NodeLabel string // "*" (the most mentioned entities), a name prefix or a label
	MaxDepth  int    // 1–5 (default 2)
	MaxNodes  int    // 1–1000 (default 100)
	MaxEdges  int    // 1–5000 (default 5 × MaxNodes)
}

// Node and Edge are the graph view's shapes (LightRAG-style, as the
// original's front end reads them).
type Node struct {
	ID         string         `json:"id"`
	Labels     []string       `json:"labels"`
	EntityType string         `json:"entity_type"`
	Properties map[string]any `json:"properties"`
}

// Edge is a relation in the graph view.
type Edge struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Source     string         `json:"source"`
	Target     string         `json:"target"`
	Properties map[string]any `json:"properties"`
}

// SubgraphView is the answer of /api/graph/subgraph.
type SubgraphView struct {
	Nodes       []Node `json:"nodes"`
	Edges       []Edge `json:"edges"`
	IsTruncated bool   `json:"is_truncated"`
	TotalNodes  int    `json:"total_nodes"`
	TotalEdges  int    `json:"total_edges"`
}

// Subgraph answers /api/graph/subgraph: the entities matching NodeLabel as
// seeds, expanded MaxDepth hops within the node and edge limits.
func (s *Service) Subgraph(ctx context.Context, sub access.Subject, q SubgraphQuery) (SubgraphView, error) {
	var v SubgraphView
	if q.MaxDepth == 0 {
		q.MaxDepth = 2
	}
	if q.MaxNodes == 0 {
		q.MaxNodes = 100
	}
	if q.MaxEdges == 0 {
		q.MaxEdges = 5 * q.MaxNodes
	}
	if q.MaxDepth < 1 || q.MaxDepth > 5 {
		return v, failure.Invalid("invalid_max_depth", "max_depth must be between 1 and 5")
	}
	if q.MaxNodes < 1 || q.MaxNodes > 1000 {
		return v, failure.Invalid("invalid_max_nodes", "max_nodes must be between 1 and 1000")
	}
	if q.MaxEdges < 1 || q.MaxEdges > 5000 {
		return v, failure.Invalid("invalid_max_edges", "max_edges must be between 1 and 5000")
	}
	if err := s.readable(ctx, sub, q.KBID); err != nil {
		return v, err
	}
	if q.NodeLabel == "" {
		q.NodeLabel = "*"
	}
	seeds, err := s.Engine.FindEntities(ctx, q.KBID, q.NodeLabel, q.MaxNodes)
	if err != nil {
		return v, err
	}
	ids := make([]string, len(seeds))
	for i, e := range seeds {
		ids[i] = e.ID
	}
	sg, err := s.Engine.Expand(ctx, q.KBID, ids, q.MaxDepth, Limits{MaxNodes: q.MaxNodes, MaxEdges: q.MaxEdges})
	if err != nil {
		return v, err
	}
	v.Nodes, v.Edges = []Node{}, []Edge{}
	for _, e := range sg.Entities {
		v.Nodes = append(v.Nodes, Node{ID: e.ID, Labels: []string{e.Name}, EntityType: e.Label,
			Properties: map[string]any{"entity_id": e.Name, "entity_type": e.Label, "description": e.Description}})
	}
	for _, r := range sg.Relations {
		v.Edges = append(v.Edges, Edge{ID: r.ID, Type: r.Type, Source: r.Source, Target: r.Target,
			Properties: map[string]any{"type": r.Type, "description": r.Description}})
	}
	v.IsTruncated = sg.Truncated
	v.TotalNodes, v.TotalEdges = len(v.Nodes), len(v.Edges)
	return v, nil
}

// Labels answers /api/graph/labels.
func (s *Service) Labels(ctx context.Context, sub access.Subject, kbID string) ([]string, error) {
	if err := s.readable(ctx, sub, kbID); err != nil {
		return nil, err
	}
	return s.Engine.Labels(ctx, kbID)
}

// Stats answers /api/graph/stats.
func (s *Service) Stats(ctx context.Context, sub access.Subject, kbID string) (Stats, error) {
	if err := s.readable(ctx, sub, kbID); err != nil {
		return Stats{}, err
	}
	return s.Engine.Stats(ctx, kbID)
}
