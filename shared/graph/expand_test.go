package graph

import (
	"fmt"
	"slices"
	"testing"
)

// A pruned walk reaches its node cap over the same nodes, in the same order,
// however its frontier is cut into hop calls; the call that reaches the cap
// expands only about as many nodes as the hop's yield so far says it needs.
func TestPrunedWalkCutsItsLastCallToWhatTheCapNeeds(t *testing.T) {
	// 200 seeds, each the source of 6 relations to leaves of its own, each
	// leaf the source of 6 relations to further leaves of its own.
	out := map[string][]Relation{}
	link := func(from string, n int) {
		for i := range n {
			to := fmt.Sprintf("%s.%d", from, i)
			out[from] = append(out[from], Relation{ID: "r:" + to, Source: from, Target: to})
		}
	}
	var seeds []string
	for s := range 200 {
		id := fmt.Sprintf("s%03d", s)
		seeds = append(seeds, id)
		link(id, 6)
		for i := range 6 {
			link(fmt.Sprintf("%s.%d", id, i), 6)
		}
	}
	lim := Limits{MaxNodes: 2000, MaxEdges: 10000, PerNode: 8}
	var parts []int
	hop := func(frontier []string) ([]Relation, error) { // in frontier order, as the engines return it
		parts = append(parts, len(frontier))
		var rels []Relation
		for _, id := range frontier {
			rels = append(rels, out[id][:min(len(out[id]), lim.PerNode)]...)
		}
		return rels, nil
	}
	entities := func(ids []string) ([]Entity, error) {
		es := make([]Entity, len(ids))
		for i, id := range ids {
			es[i].ID = id
		}
		return es, nil
	}
	var sg Subgraph
	if err := ExpandBFS(&sg, seeds, 2, lim, entities, hop); err != nil {
		t.Fatal(err)
	}

	// The walk by hand: every frontier node's relations in order, ends
	// added until the cap.
	want := slices.Clone(seeds)
	in := map[string]bool{}
	for _, s := range seeds {
		in[s] = true
	}
	frontier := seeds
	for h := 0; h < 2 && len(want) < lim.MaxNodes; h++ {
		var next []string
		for _, id := range frontier {
			for _, r := range out[id] {
				if !in[r.Target] && len(want) < lim.MaxNodes {
					in[r.Target] = true
					want, next = append(want, r.Target), append(next, r.Target)
				}
			}
		}
		frontier = next
	}
	var got []string
	for _, e := range sg.Entities {
		got = append(got, e.ID)
	}
	if !slices.Equal(got, want) || !sg.Truncated {
		t.Fatalf("walk: %d nodes (truncated %v), want the %d of the walk by hand", len(got), sg.Truncated, len(want))
	}
	// Hop 1 (200 seeds): 128, then the yield (6 a node) says the other 72.
	// Hop 2 needs 2000 − 1400 = 600 nodes: 128 first (768 found, over the
	// cap), so nothing more — where fixed parts would also have gone on.
	if !slices.Equal(parts, []int{128, 72, 128}) {
		t.Fatalf("hop calls expanded %v nodes", parts)
	}
	// A cap reached within a later call: that call is cut to the need.
	parts, sg = nil, Subgraph{}
	lim.MaxNodes = 1400 + 6*128 + 60
	if err := ExpandBFS(&sg, seeds, 2, lim, entities, hop); err != nil {
		t.Fatal(err)
	}
	// 60 more nodes at 6 a node, a quarter more: 13 nodes, not 128.
	if !slices.Equal(parts, []int{128, 72, 128, 13}) || len(sg.Entities) != lim.MaxNodes {
		t.Fatalf("hop calls expanded %v nodes for %d entities", parts, len(sg.Entities))
	}
}
