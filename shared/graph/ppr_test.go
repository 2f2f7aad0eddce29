package graph

import (
	"math"
	"strings"
	"testing"
)

func pathGraph(extra ...string) Subgraph {
	sg := Subgraph{Entities: []Entity{{ID: "a"}, {ID: "b"}, {ID: "c"}},
		Relations: []Relation{{ID: "r1", Source: "a", Target: "b"}, {ID: "r2", Source: "c", Target: "b"}}}
	for _, id := range extra {
		sg.Entities = append(sg.Entities, Entity{ID: id})
	}
	return sg
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-7 {
		t.Errorf("%s = %.9f, want %.9f", name, got, want)
	}
}

// The path a–b–c seeded at a with damping ½ solves, by hand,
// r = ½p + ½Wᵀr: r(a) = 7/12, r(b) = 1/3, r(c) = 1/12.
func TestPersonalizedPageRankOnAPath(t *testing.T) {
	r := PersonalizedPageRank(pathGraph(), map[string]float64{"a": 1}, PPROptions{Damping: 0.5})
	near(t, "a", r["a"], 7.0/12)
	near(t, "b", r["b"], 1.0/3)
	near(t, "c", r["c"], 1.0/12)
}

// A dangling seed d (no edges) teleports its mass back to the seeds: with
// seeds a and d equally, r(a) = 7/18, r(b) = 2/9, r(c) = 1/18, r(d) = 1/3.
func TestPersonalizedPageRankDanglingMassReturnsToSeeds(t *testing.T) {
	r := PersonalizedPageRank(pathGraph("d"), map[string]float64{"a": 1, "d": 1, "unknown": 5}, PPROptions{Damping: 0.5})
	near(t, "a", r["a"], 7.0/18)
	near(t, "b", r["b"], 2.0/9)
	near(t, "c", r["c"], 1.0/18)
	near(t, "d", r["d"], 1.0/3)
	sum := 0.0
	for _, v := range r {
		sum += v
	}
	near(t, "sum", sum, 1)
	if PersonalizedPageRank(pathGraph(), map[string]float64{"nope": 1}, PPROptions{}) != nil {
		t.Error("no usable seed should give nil")
	}
}

func TestRankChunksAndRRF(t *testing.T) {
	scores := map[string]float64{"a": 0.5, "b": 0.3, "c": 0.2}
	got := RankChunks(scores, map[string][]string{"a": {"c1"}, "b": {"c1", "c2"}, "c": {"c3"}}, 2)
	if len(got) != 2 || got[0].ChunkID != "c1" || got[1].ChunkID != "c2" {
		t.Fatalf("RankChunks = %+v", got)
	}
	near(t, "c1", got[0].Score, 0.8)
	fused := FuseRRF([][]string{{"x", "y"}, {"y", "z"}}, []float64{1, 1}, 60)
	if fused[0].ChunkID != "y" || len(fused) != 3 {
		t.Fatalf("FuseRRF = %+v", fused)
	}
	near(t, "y", fused[0].Score, 1.0/62+1.0/61)
	if fused[1].ChunkID != "x" || fused[2].ChunkID != "z" {
		t.Errorf("FuseRRF order = %+v", fused)
	}
}

func TestQueryNames(t *testing.T) {
	got := QueryNames("Where is Alice Martin's employer?")
	want := []string{"where", "where is", "where is alice", "where is alice martin", "where is alice martin employer",
		"is", "is alice", "is alice martin", "is alice martin employer", "alice", "alice martin", "alice martin employer",
		"martin", "martin employer", "employer"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("QueryNames = %q", got)
	}
	if got := QueryNames("v0.7 co-founder, O'Neil."); strings.Join(got, "|") != "v0.7|v0.7 co-founder|v0.7 co-founder o'neil|co-founder|co-founder o'neil|o'neil" {
		t.Fatalf("QueryNames = %q", got)
	}
}
