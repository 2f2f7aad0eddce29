package keyword_test

import (
	"math"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/keyword"
)

// Three documents whose words are their own stems and not stop words:
//
//	a: "cat dog"            |a| = 2
//	b: "cat cat fish"       |b| = 3
//	c: "bird fish fish dog" |c| = 4
//
// N = 3, avgdl = 9/3 = 3, k1 = 0.9, b = 0.4, so the length norm is
// K(d) = 0.9·(0.6 + 0.4·|d|/3): K(a) = 0.78, K(b) = 0.9, K(c) = 1.02.
// "cat" and "fish" both have df = 2: idf = ln(1 + (3−2+0.5)/(2+0.5)) = ln 1.6.
func TestBM25MatchesHandComputedScores(t *testing.T) {
	t.Parallel()
	pool, ix, _ := newIndex(t, keyword.Params{})
	apply(t, pool, ix, "kb", nil,
		keyword.Doc{ID: "a", Text: "cat dog"},
		keyword.Doc{ID: "b", Text: "cat cat fish"},
		keyword.Doc{ID: "c", Text: "bird fish fish dog"},
	)
	idf := math.Log(1.6)
	cases := []struct {
		query string
		want  []keyword.Hit
	}{
		{"cat fish", []keyword.Hit{
			{ID: "b", Score: idf * (2*1.9/(2+0.9) + 1*1.9/(1+0.9))}, // 1.0859
			{ID: "c", Score: idf * (2 * 1.9 / (2 + 1.02))},          // 0.5914
			{ID: "a", Score: idf * (1 * 1.9 / (1 + 0.78))},          // 0.5017
		}},
		// A repeated query term counts twice (Lucene's BooleanQuery of terms).
		{"cat cat", []keyword.Hit{
			{ID: "b", Score: 2 * idf * (2 * 1.9 / (2 + 0.9))},
			{ID: "a", Score: 2 * idf * (1 * 1.9 / (1 + 0.78))},
		}},
		// "bird" has df = 1: idf = ln(1 + 2.5/1.5).
		{"Birds!", []keyword.Hit{
			{ID: "c", Score: math.Log(1+2.5/1.5) * (1 * 1.9 / (1 + 1.02))},
		}},
		{"unknown words", nil},
		{"the of and", nil}, // stop words only
	}
	for _, tc := range cases {
		got := search(t, ix, "kb", tc.query, 10)
		if len(got) != len(tc.want) {
			t.Fatalf("%q: got %v, want %v", tc.query, got, tc.want)
		}
		for i := range got {
			if got[i].ID != tc.want[i].ID || math.Abs(got[i].Score-tc.want[i].Score) > 1e-9 {
				t.Errorf("%q: hit %d = %+v, want %+v", tc.query, i, got[i], tc.want[i])
			}
		}
	}
	// k truncates after ranking; k <= 0 asks for nothing.
	if got := ids(search(t, ix, "kb", "cat fish", 2)); len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Errorf("top 2 = %v, want [b c]", got)
	}
	if got := search(t, ix, "kb", "cat fish", 0); len(got) != 0 {
		t.Errorf("k=0 returned %v", got)
	}
	// A missing index is empty, not an error.
	if got := search(t, ix, "no-such-kb", "cat", 10); len(got) != 0 {
		t.Errorf("missing index returned %v", got)
	}
}

func TestParamsChangeScoring(t *testing.T) {
	t.Parallel()
	pool, _, _ := newIndex(t, keyword.Params{})
	ix := keyword.New(pool, keyword.NewAnalyzer("auto"), keyword.Params{K1: 1.2, B: -1}) // b = 0: no length norm
	apply(t, pool, ix, "kb", nil,
		keyword.Doc{ID: "short", Text: "cat"},
		keyword.Doc{ID: "long", Text: "cat dog bird fish horse"},
		keyword.Doc{ID: "other", Text: "dog"},
	)
	hits := search(t, ix, "kb", "cat", 10)
	// Without length normalisation both documents score idf·tf·(k1+1)/(tf+k1).
	want := math.Log(1+1.5/2.5) * 2.2 / 2.2
	if len(hits) != 2 || math.Abs(hits[0].Score-want) > 1e-9 || math.Abs(hits[1].Score-want) > 1e-9 {
		t.Fatalf("hits = %+v, want two hits scoring %v", hits, want)
	}
	if hits[0].ID != "long" { // ties break by id
		t.Errorf("tie order = %v, want [long short]", ids(hits))
	}
}
