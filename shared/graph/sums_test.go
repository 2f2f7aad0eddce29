package graph

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
)

// TestChunkSumsMatchRankChunks sums random mention rows with the table and
// with RankChunks' map and compares every chunk's score and the order —
// past the table's first size (it grows), with a hash that collides every
// id (ids told apart by their bytes), and again on a pooled, reused table.
func TestChunkSumsMatchRankChunks(t *testing.T) {
	collide := func(maphash.Seed, []byte) uint64 { return 7 }
	cases := []struct {
		name   string
		chunks int
		hash   func(maphash.Seed, []byte) uint64
	}{
		{"grows", minSlots, maphash.Bytes}, // minSlots chunks fill twice the half the first table may hold
		{"collides", 300, collide},         // every id in one probe run
		{"few", 5, maphash.Bytes},
	}
	var pool sumsPool
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for round := 0; round < 2; round++ { // the second round reuses the pooled table
				rng := rand.New(rand.NewPCG(uint64(tc.chunks), uint64(round)))
				mentions := map[string][]string{}
				scores := map[string]float64{}
				c := pool.get()
				c.hash = tc.hash
				var ents []string
				for e := 0; e < 40; e++ {
					ent := fmt.Sprintf("ent_%02d", e)
					ents = append(ents, ent)
					scores[ent] = float64(rng.IntN(5)+1) / 8 // few distinct values: ties
				}
				// Rows in entity order, as the database sends them.
				for _, ent := range ents {
					for k := 0; k < tc.chunks/10+1; k++ {
						ch := fmt.Sprintf("file_%d_chunk_%d", rng.IntN(tc.chunks)%7, rng.IntN(tc.chunks))
						mentions[ent] = append(mentions[ent], ch)
					}
					seen := map[string]bool{}
					for _, ch := range mentions[ent] {
						if !seen[ch] {
							seen[ch] = true
							c.add([]byte(ch), scores[ent])
						}
					}
					mentions[ent] = keys(seen)
				}
				got := c.top(0)
				want := RankChunks(scores, mentions, 0)
				if len(got) != len(want) {
					t.Fatalf("round %d: %d chunks, want %d", round, len(got), len(want))
				}
				for i := range want {
					if got[i].ChunkID != want[i].ChunkID || got[i].Score != want[i].Score {
						t.Fatalf("round %d: #%d = %v, want %v", round, i, got[i], want[i])
					}
				}
				if top := c.top(10); len(want) > 10 && fmt.Sprint(top) != fmt.Sprint(want[:10]) {
					t.Fatalf("round %d: top 10 = %v, want %v", round, top, want[:10])
				}
				pool.put(c)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
