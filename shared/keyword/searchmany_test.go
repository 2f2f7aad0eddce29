package keyword_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
)

// SearchMany returns, for each query, exactly what Search returns, from
// the cache and from SQL (an index larger than the cache), and nothing for
// a missing index or queries without terms.
func TestSearchManyMatchesSearch(t *testing.T) {
	t.Parallel()
	for _, cacheBytes := range []int64{0, 1} {
		t.Run(fmt.Sprint("cache bytes ", cacheBytes), func(t *testing.T) {
			t.Parallel()
			pool, ix, _ := newIndex(t, keyword.Params{CacheBytes: cacheBytes})
			words := strings.Fields("solar wind water heat grid panel turbine storage battery hydrogen coal gas oil steam pump")
			rng := rand.New(rand.NewPCG(3, 5))
			docs := make([]keyword.Doc, 150)
			for i := range docs {
				w := make([]string, 3+rng.IntN(20))
				for j := range w {
					w[j] = words[rng.IntN(len(words))]
				}
				docs[i] = keyword.Doc{ID: fmt.Sprintf("d%03d", i), Text: strings.Join(w, " ")}
			}
			apply(t, pool, ix, "kb", nil, docs...)
			queries := []string{"", "the of", "solar", "wind wind turbine", "zzz", "coal gas oil steam pump"}
			for range 10 {
				queries = append(queries, words[rng.IntN(len(words))]+" "+words[rng.IntN(len(words))])
			}
			got, err := ix.SearchMany(context.Background(), "kb", queries, 7, nil)
			if err != nil || len(got) != len(queries) {
				t.Fatalf("SearchMany: %d lists, %v", len(got), err)
			}
			for i, q := range queries {
				if want := search(t, ix, "kb", q, 7); !reflect.DeepEqual(got[i], want) {
					t.Fatalf("query %q: SearchMany %v, Search %v", q, got[i], want)
				}
			}
			none, err := ix.SearchMany(context.Background(), "missing", queries, 7, nil)
			if err != nil || len(none) != len(queries) || none[2] != nil {
				t.Fatalf("missing index: %v, %v", none, err)
			}
		})
	}
}
