package graph

import (
	"slices"
	"strings"
)

// prunedFrontier is at most how many frontier nodes a pruned expansion
// (Limits.PerNode) passes to one hop call (see partSize); it stops calling
// once the node cap is reached.
const prunedFrontier = 128

// ExpandBFS is Engine.Expand's breadth-first walk, shared by the engines so
// that limits cut the same nodes and edges whatever stores the graph:
// entities(ids) loads the given entities (unknown ids left out, any order),
// hop(frontier) returns the relations touching the frontier in either
// direction, ordered by id (with Limits.PerNode, at most that many per node
// and direction, where the engine can prune). sg receives the seeds first, then each hop's new
// entities in the order hop found them, and the relations among them that
// the walk's hop calls returned (a pruned walk stops calling at the node
// cap: relations among kept nodes that only unexpanded frontier nodes lend
// are not in it).
func ExpandBFS(sg *Subgraph, seeds []string, depth int, lim Limits, entities func(ids []string) ([]Entity, error), hop func(frontier []string) ([]Relation, error)) error {
	lim = lim.norm()
	if len(seeds) == 0 {
		return nil
	}
	order := []string{}
	for _, s := range uniq(seeds) {
		if len(order) >= lim.MaxNodes {
			sg.Truncated = true
			break
		}
		order = append(order, s)
	}
	// Only existing seeds count; load them first so unknown ids fall out.
	ents, err := entities(order)
	if err != nil {
		return err
	}
	ents = inOrder(ents, order)
	order = order[:0]
	hint := min(lim.MaxNodes, 1<<14) // the maps' initial size: the cap, within reason
	in := make(map[string]bool, hint)
	for _, e := range ents {
		in[e.ID] = true
		order = append(order, e.ID)
	}
	// The relations gathered, in kept; rels holds their positions by id.
	rels := make(map[string]int32, hint)
	var kept []Relation
	frontier := append([]string(nil), order...)
	for h := 0; h < depth && len(frontier) > 0 && !sg.Truncated; h++ {
		var next []string
		walked, added := 0, 0 // this hop's frontier nodes expanded so far, and the nodes they added
		for rest := frontier; len(rest) > 0 && !sg.Truncated; {
			n := len(rest)
			if lim.PerNode > 0 { // pruned: expand in frontier order until the node cap
				n = min(n, partSize(lim.MaxNodes-len(order), walked, added))
			}
			part := rest[:n]
			rest = rest[n:]
			found, err := hop(part)
			if err != nil {
				return err
			}
			before := len(order)
			for _, r := range found {
				for _, end := range []string{r.Source, r.Target} {
					if in[end] {
						continue
					}
					if len(order) >= lim.MaxNodes {
						sg.Truncated = true
						continue
					}
					in[end] = true
					order = append(order, end)
					next = append(next, end)
				}
				if _, seen := rels[r.ID]; !seen && in[r.Source] && in[r.Target] {
					rels[r.ID] = int32(len(kept))
					kept = append(kept, r)
				}
			}
			walked, added = walked+n, added+len(order)-before
		}
		frontier = next
	}
	if len(order) > len(ents) {
		more, err := entities(order[len(ents):])
		if err != nil {
			return err
		}
		ents = append(ents, more...)
	}
	sg.Entities = inOrder(ents, order)
	byID := make([]int32, len(kept)) // sorted as positions: a Relation is five strings
	for i := range byID {
		byID[i] = int32(i)
	}
	slices.SortFunc(byID, func(a, b int32) int { return strings.Compare(kept[a].ID, kept[b].ID) })
	if len(byID) > lim.MaxEdges {
		byID, sg.Truncated = byID[:lim.MaxEdges], true
	}
	sg.Relations = slices.Grow(sg.Relations, len(byID))
	for _, i := range byID {
		sg.Relations = append(sg.Relations, kept[i])
	}
	return nil
}

// partSize is how many frontier nodes the next pruned hop call expands:
// prunedFrontier for a hop's first call, then as many as this hop's yield so
// far (added nodes per walked node) says fill the need nodes left under the
// cap, with a quarter more (at least 8, at most prunedFrontier). The hop
// returns a part's relations in frontier order, so how the frontier is cut
// never changes which nodes the walk keeps, nor their order: the call that
// reaches the cap no longer expands a whole part of nodes whose relations
// go unused. It does change the edges: relations among kept nodes that only
// the rest of such a part lent are no longer gathered.
func partSize(need, walked, added int) int {
	if walked == 0 || added == 0 {
		return prunedFrontier
	}
	n := (need*walked*5 + added*4 - 1) / (added * 4) // ⌈need / yield × 1.25⌉
	return max(8, min(n, prunedFrontier))
}

// inOrder returns ents ordered as ids (ids without an entity left out).
func inOrder(ents []Entity, ids []string) []Entity {
	byID := make(map[string]Entity, len(ents))
	for _, e := range ents {
		byID[e.ID] = e
	}
	out := make([]Entity, 0, len(ids))
	for _, id := range ids {
		if e, ok := byID[id]; ok {
			out = append(out, e)
		}
	}
	return out
}
