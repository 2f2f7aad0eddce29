package vector

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
)

// BenchmarkSearch measures the in-memory search alone (no database round
// trip) at 5k and 100k vectors of dimension 256 and 1024: exact with all
// cores, exact on one core, and through a calibrated HNSW graph, reporting
// p50/p99 latency and, for the graph, recall@10 against exact search. The
// data lies near a 48-dimensional subspace in clusters (see embeddingLike),
// like real text embeddings; random data is the worst case for graphs and is
// covered by TestHNSWRecall and TestHNSWUnusableOnHardData.
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 400x ./shared/vector/
func BenchmarkSearch(b *testing.B) {
	for _, dim := range []int{256, 1024} {
		for _, n := range []int{5000, 100000} {
			b.Run(fmt.Sprintf("dim=%d/n=%d", dim, n), func(b *testing.B) {
				data := embeddingLike(1, 1, n, dim, 48, 300)
				queries := embeddingLike(1, 2, 500, dim, 48, 300)
				for i := range queries {
					normalize(queries[i])
				}
				s := memSnapshot(data, 200)
				data = nil
				b.Run("exact", func(b *testing.B) {
					benchSearch(b, s, queries, searchParams{k: 10, workers: runtime.GOMAXPROCS(0)}, nil)
				})
				b.Run("exact-1core", func(b *testing.B) {
					benchSearch(b, s, queries, searchParams{k: 10, workers: 1}, nil)
				})
				t0 := time.Now()
				h := buildHNSW(nil, s, hnswConfig{m: 16, efConstruction: 100, workers: runtime.GOMAXPROCS(0), seed: 1, recall: 0.95})
				built := time.Since(t0)
				g := s.withIndex(h)
				b.Run("hnsw", func(b *testing.B) {
					if !h.usable {
						b.Skipf("graph not usable (recall %.3f at ef %d)", h.recall, h.ef10)
					}
					benchSearch(b, g, queries, searchParams{k: 10, useIndex: true}, s)
					// Reported after the loop: b.Loop resets earlier metrics.
					b.ReportMetric(built.Seconds(), "build-s")
					b.ReportMetric(float64(h.ef10), "ef")
					b.ReportMetric(h.visits, "sims/op")
				})
			})
		}
	}
}

// benchSearch runs queries round-robin, reporting latency percentiles and,
// when exact is set, recall@k against it.
func benchSearch(b *testing.B, s *snapshot, queries [][]float32, p searchParams, exact *snapshot) {
	recall := -1.0
	if exact != nil {
		found, total := 0, 0
		for _, q := range queries[:200] {
			want := map[string]bool{}
			hs, _ := exact.search(q, searchParams{k: p.k, workers: runtime.GOMAXPROCS(0)})
			for _, h := range hs {
				want[h.ID] = true
			}
			got, _ := s.search(q, p)
			for _, h := range got {
				if want[h.ID] {
					found++
				}
			}
			total += len(hs)
		}
		recall = float64(found) / float64(total)
	}
	lat := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		s.search(queries[i%len(queries)], p)
		lat = append(lat, time.Since(t0))
		i++
	}
	reportLatency(b, lat)
	if recall >= 0 {
		b.ReportMetric(recall, "recall")
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkPostgresSearch measures Search through the Postgres engine, warm:
// the version query to PostgreSQL plus the in-memory search, at 5k and 100k
// vectors of dimension 256 and 1024, exact (graphs off) and with the graph
// the store builds in the background. It also reports the time to write the
// vectors (Upsert in batches of 1000) and the first, cold search (whole load).
//
//	go test -run '^$' -bench BenchmarkPostgresSearch -benchtime 400x ./shared/vector/
func BenchmarkPostgresSearch(b *testing.B) {
	for _, dim := range []int{256, 1024} {
		for _, n := range []int{5000, 100000} {
			b.Run(fmt.Sprintf("dim=%d/n=%d", dim, n), func(b *testing.B) {
				pool, _ := pgtest.NewDatabase(b)
				ctx := context.Background()
				data := embeddingLike(1, 1, n, dim, 48, 300)
				queries := embeddingLike(1, 2, 500, dim, 48, 300)
				name := "kb_bench"
				writer := NewPostgres(pool, PostgresOptions{})
				defer writer.Close()
				if err := writer.EnsureCollection(ctx, name, dim); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				for start := 0; start < n; start += 1000 {
					items := make([]Item, 0, 1000)
					for i := start; i < min(start+1000, n); i++ {
						items = append(items, Item{ID: fmt.Sprintf("file%d_chunk_%d", i%200, i), Group: fmt.Sprintf("file%d", i%200), Vector: data[i]})
					}
					if err := writer.Upsert(ctx, name, items); err != nil {
						b.Fatal(err)
					}
				}
				written := time.Since(t0)
				data = nil
				for _, mode := range []string{"exact", "hnsw"} {
					b.Run(mode, func(b *testing.B) {
						opts := PostgresOptions{HNSWThreshold: -1}
						if mode == "hnsw" {
							opts = PostgresOptions{HNSWThreshold: 1000}
						}
						s := NewPostgres(pool, opts)
						defer s.Close()
						t0 := time.Now()
						if _, err := s.Search(ctx, name, queries[0], 10, nil); err != nil {
							b.Fatal(err)
						}
						cold := time.Since(t0)
						var built time.Duration
						if mode == "hnsw" {
							t0 := time.Now()
							for !s.CacheInfo(name).Indexed {
								time.Sleep(50 * time.Millisecond)
							}
							built = time.Since(t0)
						}
						lat := make([]time.Duration, 0, 1024)
						i := 0
						for b.Loop() {
							t0 := time.Now()
							if _, err := s.Search(ctx, name, queries[i%len(queries)], 10, nil); err != nil {
								b.Fatal(err)
							}
							lat = append(lat, time.Since(t0))
							i++
						}
						reportLatency(b, lat)
						b.ReportMetric(cold.Seconds(), "cold-s")
						b.ReportMetric(written.Seconds(), "write-s")
						if mode == "hnsw" {
							b.ReportMetric(built.Seconds(), "build-s")
						}
					})
				}
			})
		}
	}
}
