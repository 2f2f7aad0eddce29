// Package graphtest is the contract suite every graph.Engine passes: the
// embedded PostgreSQL engine runs it in shared/graph, and any other engine
// (Neo4j) runs the same Run against its real server or a scripted stub.
//
// Imported by: tests of graph engines. May import: shared/graph and the
// standard library.
package graphtest

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/graph"
)

// Run runs the contract suite. newEngine returns an engine over an empty
// store for each subtest (subtests may run in parallel).
func Run(t *testing.T, newEngine func(t *testing.T) graph.Engine) {
	t.Run("WriteIsIdempotentAndIdsAreStable", func(t *testing.T) { t.Parallel(); writeIdempotent(t, newEngine(t)) })
	t.Run("DeleteFileKeepsSharedEntities", func(t *testing.T) { t.Parallel(); deleteFile(t, newEngine(t)) })
	t.Run("RewriteChunkDropsWhatItNoLongerSays", func(t *testing.T) { t.Parallel(); rewrite(t, newEngine(t)) })
	t.Run("ExpandHonoursDepthAndLimits", func(t *testing.T) { t.Parallel(); expand(t, newEngine(t)) })
	t.Run("LookupsAndStats", func(t *testing.T) { t.Parallel(); lookups(t, newEngine(t)) })
	t.Run("KnowledgeBasesAreIsolated", func(t *testing.T) { t.Parallel(); isolation(t, newEngine(t)) })
}

// Chunk builds a chunk graph from (source, relation, target) triples over
// entities of type "Person" unless listed in types.
func Chunk(chunkID, fileID string, types map[string]string, triples ...[3]string) graph.ChunkGraph {
	var x graph.Extracted
	seen := map[string]bool{}
	for _, tr := range triples {
		for _, n := range []string{tr[0], tr[2]} {
			if !seen[n] {
				seen[n] = true
				typ := types[n]
				if typ == "" {
					typ = "Person"
				}
				x.Entities = append(x.Entities, graph.ExtractedEntity{Name: n, Type: typ})
			}
		}
		x.Relations = append(x.Relations, graph.ExtractedRelation{Source: tr[0], Type: tr[1], Target: tr[2]})
	}
	return graph.Build(chunkID, fileID, x)
}

func id(name string) string { return graph.EntityID(name, "Person") }

func write(t *testing.T, e graph.Engine, kb string, cs ...graph.ChunkGraph) {
	t.Helper()
	if err := e.WriteChunks(context.Background(), kb, cs); err != nil {
		t.Fatalf("WriteChunks: %v", err)
	}
}

func stats(t *testing.T, e graph.Engine, kb string) graph.Stats {
	t.Helper()
	s, err := e.Stats(context.Background(), kb)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

func names(t *testing.T, e graph.Engine, kb string) []string {
	t.Helper()
	found, err := e.FindEntities(context.Background(), kb, "*", 1000)
	if err != nil {
		t.Fatalf("FindEntities: %v", err)
	}
	var out []string
	for _, x := range found {
		out = append(out, x.Name)
	}
	sort.Strings(out)
	return out
}

func writeIdempotent(t *testing.T, e graph.Engine) {
	c := Chunk("f1_a", "f1", nil, [3]string{"Alice", "knows", "Bob"}, [3]string{"Bob", "knows", "Carol"})
	write(t, e, "kb1", c)
	write(t, e, "kb1", c) // redelivery
	s := stats(t, e, "kb1")
	if s.Entities != 3 || s.Relations != 2 || s.Chunks != 1 || s.Files != 1 {
		t.Fatalf("stats after duplicate write = %+v, want 3 entities, 2 relations, 1 chunk, 1 file", s)
	}
	// The same fact in another chunk shares its rows.
	write(t, e, "kb1", Chunk("f2_b", "f2", nil, [3]string{" alice ", "KNOWS", "bob"}))
	if s := stats(t, e, "kb1"); s.Entities != 3 || s.Relations != 2 || s.Chunks != 2 {
		t.Fatalf("stats after restating a fact = %+v, want 3 entities, 2 relations, 2 chunks", s)
	}
	m, err := e.Mentions(context.Background(), "kb1", []string{id("Alice")})
	if err != nil {
		t.Fatal(err)
	}
	if got := m[id("Alice")]; !slices.Equal(got, []string{"f1_a", "f2_b"}) {
		t.Fatalf("Alice is mentioned by %v, want [f1_a f2_b]", got)
	}
}

func deleteFile(t *testing.T, e graph.Engine) {
	ctx := context.Background()
	// File 1 says Alice-knows-Bob and Bob-knows-Carol; file 2 says
	// Bob-knows-Carol and Carol-likes-Dave. Bob and Carol and the shared
	// relation survive file 1's deletion; Alice and her relation do not.
	write(t, e, "kb", Chunk("f1_a", "f1", nil, [3]string{"Alice", "knows", "Bob"}),
		Chunk("f1_b", "f1", nil, [3]string{"Bob", "knows", "Carol"}),
		Chunk("f2_a", "f2", nil, [3]string{"Bob", "knows", "Carol"}, [3]string{"Carol", "likes", "Dave"}))
	if err := e.DeleteFile(ctx, "kb", "f1"); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	if got := names(t, e, "kb"); !slices.Equal(got, []string{"Bob", "Carol", "Dave"}) {
		t.Fatalf("entities after deleting f1 = %v, want [Bob Carol Dave]", got)
	}
	sg, err := e.Expand(ctx, "kb", []string{id("Bob")}, 5, graph.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sg.Relations) != 2 {
		t.Fatalf("relations after deleting f1 = %+v, want Bob-knows-Carol and Carol-likes-Dave", sg.Relations)
	}
	if s := stats(t, e, "kb"); s.Files != 1 || s.Chunks != 1 || s.Relations != 2 {
		t.Fatalf("stats after deleting f1 = %+v", s)
	}
	// Deleting twice is a no-op; deleting the last file empties the graph.
	if err := e.DeleteFile(ctx, "kb", "f1"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteFile(ctx, "kb", "f2"); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, e, "kb"); s.Entities != 0 || s.Relations != 0 || s.Chunks != 0 {
		t.Fatalf("stats after deleting every file = %+v, want empty", s)
	}
}

func rewrite(t *testing.T, e graph.Engine) {
	ctx := context.Background()
	write(t, e, "kb", Chunk("f1_a", "f1", nil, [3]string{"Alice", "knows", "Bob"}),
		Chunk("f1_b", "f1", nil, [3]string{"Bob", "knows", "Carol"}))
	// f1_a is re-extracted and now says something else.
	write(t, e, "kb", Chunk("f1_a", "f1", nil, [3]string{"Alice", "admires", "Carol"}))
	if got := names(t, e, "kb"); !slices.Equal(got, []string{"Alice", "Bob", "Carol"}) {
		t.Fatalf("entities = %v", got)
	}
	if s := stats(t, e, "kb"); s.Relations != 2 {
		t.Fatalf("relations = %d, want 2 (knows Bob-Carol, admires Alice-Carol)", s.Relations)
	}
	// Removing f1_b (its content changed away) drops Bob, mentioned nowhere else.
	if err := e.RemoveChunks(ctx, "kb", []string{"f1_b"}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, e, "kb"); !slices.Equal(got, []string{"Alice", "Carol"}) {
		t.Fatalf("entities after removing f1_b = %v, want [Alice Carol]", got)
	}
	ce, err := e.ChunkEntities(ctx, "kb", []string{"f1_a", "f1_b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ce["f1_b"]) != 0 || len(ce["f1_a"]) != 2 {
		t.Fatalf("chunk entities = %v", ce)
	}
}

func expand(t *testing.T, e graph.Engine) {
	ctx := context.Background()
	// A chain a-b-c-d-e and a star around a.
	write(t, e, "kb", Chunk("c1", "f", nil, [3]string{"a", "r", "b"}, [3]string{"b", "r", "c"}, [3]string{"c", "r", "d"}, [3]string{"d", "r", "e"}),
		Chunk("c2", "f", nil, [3]string{"x1", "r", "a"}, [3]string{"a", "r", "x2"}))
	ids := func(sg graph.Subgraph) []string {
		var out []string
		for _, en := range sg.Entities {
			out = append(out, en.Name)
		}
		sort.Strings(out)
		return out
	}
	sg, err := e.Expand(ctx, "kb", []string{id("a")}, 1, graph.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(sg); !slices.Equal(got, []string{"a", "b", "x1", "x2"}) || len(sg.Relations) != 3 || sg.Truncated {
		t.Fatalf("1 hop from a = %v with %d relations (truncated %v)", got, len(sg.Relations), sg.Truncated)
	}
	sg, _ = e.Expand(ctx, "kb", []string{id("a")}, 2, graph.Limits{})
	if got := ids(sg); !slices.Equal(got, []string{"a", "b", "c", "x1", "x2"}) || len(sg.Relations) != 4 {
		t.Fatalf("2 hops from a = %v with %d relations", got, len(sg.Relations))
	}
	if sg.Entities[0].Name != "a" {
		t.Fatalf("seeds come first: %v", sg.Entities)
	}
	sg, _ = e.Expand(ctx, "kb", []string{id("a")}, 4, graph.Limits{})
	if got := ids(sg); len(got) != 7 || len(sg.Relations) != 6 {
		t.Fatalf("4 hops from a = %v with %d relations", got, len(sg.Relations))
	}
	sg, _ = e.Expand(ctx, "kb", []string{id("a")}, 4, graph.Limits{MaxNodes: 3})
	if len(sg.Entities) != 3 || !sg.Truncated {
		t.Fatalf("3-node limit: %v truncated %v", ids(sg), sg.Truncated)
	}
	for _, r := range sg.Relations {
		in := false
		for _, a := range sg.Entities {
			for _, b := range sg.Entities {
				in = in || (r.Source == a.ID && r.Target == b.ID)
			}
		}
		if !in {
			t.Fatalf("relation %+v leaves the returned entities", r)
		}
	}
	sg, _ = e.Expand(ctx, "kb", []string{id("a")}, 4, graph.Limits{MaxEdges: 2})
	if len(sg.Relations) != 2 || !sg.Truncated {
		t.Fatalf("2-edge limit: %d relations truncated %v", len(sg.Relations), sg.Truncated)
	}
	sg, _ = e.Expand(ctx, "kb", []string{"ent_missing"}, 2, graph.Limits{})
	if len(sg.Entities) != 0 || len(sg.Relations) != 0 {
		t.Fatalf("unknown seed expands to %+v", sg)
	}
}

func lookups(t *testing.T, e graph.Engine) {
	ctx := context.Background()
	types := map[string]string{"Paris": "City", "France": "Country", "Lyon": "City"}
	write(t, e, "kb", Chunk("c1", "f", types, [3]string{"Paris", "capital_of", "France"}),
		Chunk("c2", "f", types, [3]string{"Lyon", "in", "France"}),
		Chunk("c3", "g", types, [3]string{"Marie", "lives_in", "Paris"}))
	labels, err := e.Labels(ctx, "kb")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(labels, []string{"City", "Country", "Person"}) {
		t.Fatalf("labels = %v", labels)
	}
	found, err := e.FindEntities(ctx, "kb", "pa", 10)
	if err != nil || len(found) != 1 || found[0].Name != "Paris" || found[0].Label != "City" || found[0].ID != graph.EntityID("paris", "city") {
		t.Fatalf("FindEntities(pa) = %+v, %v", found, err)
	}
	found, _ = e.FindEntities(ctx, "kb", "City", 10)
	if len(found) != 2 {
		t.Fatalf("FindEntities(City) = %+v, want Paris and Lyon", found)
	}
	found, _ = e.FindEntities(ctx, "kb", "*", 2)
	if len(found) != 2 || found[0].Name != "France" && found[0].Name != "Paris" {
		t.Fatalf("most mentioned first: %+v", found)
	}
	found, _ = e.FindEntities(ctx, "kb", "%", 10)
	if len(found) != 0 {
		t.Fatalf("a LIKE wildcard is matched literally: %+v", found)
	}
	named, err := e.EntitiesNamed(ctx, "kb", []string{"paris", "marie", "nowhere"}, 10)
	if err != nil || len(named) != 2 || named[0].Name+named[1].Name != "MarieParis" && named[0].Name+named[1].Name != "ParisMarie" {
		t.Fatalf("EntitiesNamed(paris, marie) = %+v, %v", named, err)
	}
	if named, _ = e.EntitiesNamed(ctx, "kb", []string{"paris", "france"}, 1); len(named) != 1 || named[0].Name != "France" {
		t.Fatalf("EntitiesNamed limit 1, longest name first = %+v", named)
	}
	if named, _ = e.EntitiesNamed(ctx, "other", []string{"paris"}, 10); len(named) != 0 {
		t.Fatalf("EntitiesNamed in another knowledge base = %+v", named)
	}
	s := stats(t, e, "kb")
	if s.Entities != 4 || s.Relations != 3 || s.Chunks != 3 || s.Files != 2 ||
		!slices.Equal(s.EntityType, []graph.LabelCount{{Label: "City", Count: 2}, {Label: "Country", Count: 1}, {Label: "Person", Count: 1}}) {
		t.Fatalf("stats = %+v", s)
	}
}

func isolation(t *testing.T, e graph.Engine) {
	ctx := context.Background()
	c := Chunk("c1", "f", nil, [3]string{"Alice", "knows", "Bob"})
	write(t, e, "kbA", c)
	write(t, e, "kbB", c)
	if err := e.DeleteFile(ctx, "kbA", "f"); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, e, "kbB"); s.Entities != 2 || s.Relations != 1 {
		t.Fatalf("deleting kbA's file touched kbB: %+v", s)
	}
	write(t, e, "kbA", c)
	if err := e.DeleteKB(ctx, "kbA"); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, e, "kbA"); s.Entities != 0 || s.Chunks != 0 {
		t.Fatalf("kbA after DeleteKB: %+v", s)
	}
	if s := stats(t, e, "kbB"); s.Entities != 2 {
		t.Fatalf("DeleteKB(kbA) touched kbB: %+v", s)
	}
	if l, _ := e.Labels(ctx, "kbA"); len(l) != 0 {
		t.Fatalf("labels of an empty graph = %v", l)
	}
}
