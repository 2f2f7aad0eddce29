package graph

import "sort"

// prunedFrontier is how many frontier nodes a pruned expansion
// (Limits.PerNode) passes to one hop call; it stops calling once the node
// cap is reached.
const prunedFrontier = 128

// ExpandBFS is Engine.Expand's breadth-first walk, shared by the engines so
// that limits cut the same nodes and edges whatever stores the graph:
// entities(ids) loads the given entities (unknown ids left out, any order),
// hop(frontier) returns the relations touching the frontier in either
// direction, ordered by id (with Limits.PerNode, at most that many per node
// and direction, where the engine can prune). sg receives the seeds first, then each hop's new
// entities in the order hop found them, and the relations among them.
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
	in := map[string]bool{}
	for _, e := range ents {
		in[e.ID] = true
		order = append(order, e.ID)
	}
	rels := map[string]Relation{}
	frontier := append([]string(nil), order...)
	for h := 0; h < depth && len(frontier) > 0 && !sg.Truncated; h++ {
		parts := [][]string{frontier}
		if lim.PerNode > 0 { // pruned: expand in frontier order until the node cap
			parts = nil
			for len(frontier) > 0 {
				n := min(len(frontier), prunedFrontier)
				parts, frontier = append(parts, frontier[:n]), frontier[n:]
			}
		}
		var next []string
		for _, part := range parts {
			if sg.Truncated {
				break
			}
			found, err := hop(part)
			if err != nil {
				return err
			}
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
				if in[r.Source] && in[r.Target] {
					rels[r.ID] = r
				}
			}
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
	ids := make([]string, 0, len(rels))
	for id := range rels {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if len(sg.Relations) >= lim.MaxEdges {
			sg.Truncated = true
			break
		}
		sg.Relations = append(sg.Relations, rels[id])
	}
	return nil
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
