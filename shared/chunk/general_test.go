package chunk_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

const englishArticle = `# The Quiet Revolution of Heat Pumps

Heat pumps move heat instead of making it. A refrigerator does the same thing in reverse, pushing warmth out of a small box into the kitchen.

In winter, an air-source heat pump pulls heat from outdoor air, even when that air is below freezing. The refrigerant boils at very low temperatures, so there is always some energy to collect.

## Why efficiency matters

Because the pump moves heat rather than generating it, it can deliver three or four units of heat for every unit of electricity. Engineers call this ratio the coefficient of performance.

A gas furnace, by contrast, can never exceed one unit of heat per unit of fuel. The best condensing furnaces reach about ninety-five percent.

## Installation

Most homes need a professional assessment before installation. The installer checks insulation, duct work and the size of the electrical panel.

Ground-source systems cost more up front because they need drilling, but they run more efficiently for decades.

## Conclusion

Heat pumps are not new, but better compressors and cheaper electricity from renewables have made them the default choice in many countries.
`

func TestGeneralEnglishArticle(t *testing.T) {
	t.Parallel()
	const n = 48
	cs := split(t, "general", englishArticle, cfgN(n), chunk.Options{})
	if len(cs) < 3 {
		t.Fatalf("only %d chunks", len(cs))
	}
	maxTokens(t, cs, n*3/2)
	// Chunks are whole source lines, in order, each line exactly once.
	var got []string
	for _, c := range cs {
		got = append(got, strings.Split(c.Content, "\n")...)
		src := source(englishArticle, c)
		first, _, _ := strings.Cut(c.Content, "\n")
		if !strings.HasPrefix(src, first) || !strings.HasSuffix(src, c.Content[strings.LastIndex(c.Content, "\n")+1:]) {
			t.Errorf("chunk %d located at %q", c.Index, src)
		}
	}
	var want []string
	for _, l := range strings.Split(englishArticle, "\n") {
		if strings.TrimSpace(l) != "" {
			want = append(want, l)
		}
	}
	if !equalStrings(got, want) {
		t.Fatalf("chunk lines differ from the source lines:\n%q\n%q", got, want)
	}
	if cs[0].Headings[0] != "The Quiet Revolution of Heat Pumps" {
		t.Errorf("first chunk headings %q", cs[0].Headings)
	}
	// Headings are the heading path in force where the chunk starts.
	for _, c := range cs[1:] {
		if h, ok := strings.CutPrefix(c.Content, "## "); ok {
			title, _, _ := strings.Cut(h, "\n")
			if !equalStrings(c.Headings, []string{"The Quiet Revolution of Heat Pumps", title}) {
				t.Errorf("chunk %d starting at heading %q has headings %q", c.Index, title, c.Headings)
			}
		} else if len(c.Headings) != 2 {
			t.Errorf("chunk %d headings %q", c.Index, c.Headings)
		}
	}
}

// A chunk grows until its token count exceeds chunk_token_num; the next
// section then starts a new chunk.
func TestGeneralMergeThreshold(t *testing.T) {
	t.Parallel()
	l1, l2, l3, l4, l5 := words("a", 0, 6), words("b", 0, 6), words("c", 0, 6), words("d", 0, 6), words("e", 0, 6)
	md := strings.Join([]string{l1, l2, l3, l4, l5}, "\n")
	cs := split(t, "general", md, cfgN(16), chunk.Options{})
	want := []string{l1 + "\n" + l2 + "\n" + l3, l4 + "\n" + l5} // 18 > 16 closes the first
	if !equalStrings(contents(cs), want) {
		t.Fatalf("got %q\nwant %q", contents(cs), want)
	}
	if cs[0].TokenCount != 18 {
		t.Fatalf("first chunk %d tokens", cs[0].TokenCount)
	}
}

// Up to 1.5× chunk_token_num a merged chunk is kept; above, it is hard-split
// into chunk_token_num pieces without losing text.
func TestGeneralHardLimit(t *testing.T) {
	t.Parallel()
	t.Run("overshoot kept", func(t *testing.T) {
		t.Parallel()
		md := words("x", 0, 18) + "\n" + words("y", 0, 8)
		cs := split(t, "general", md, cfgN(20), chunk.Options{})
		if len(cs) != 1 || cs[0].TokenCount != 26 {
			t.Fatalf("got %d chunks, first %d tokens; want one of 26 (≤ 30)", len(cs), cs[0].TokenCount)
		}
	})
	t.Run("long chinese line hard-split", func(t *testing.T) {
		t.Parallel()
		line := strings.Repeat("运维知识库需要高质量的分块策略。", 200) // 3000 tokens, one line
		md := "# 运维\n\n" + line
		cs := split(t, "general", md, cfgN(512), chunk.Options{})
		maxTokens(t, cs, 512)
		if strings.Join(contents(cs), "") != "# 运维\n"+line || len(cs) != 6 {
			t.Fatalf("%d chunks; the hard split lost or reordered text", len(cs))
		}
		for _, c := range cs[1:] {
			if strings.HasPrefix(c.Content, "。") {
				t.Errorf("chunk %d starts with dangling punctuation", c.Index)
			}
		}
	})
}

func TestGeneralOverlap(t *testing.T) {
	t.Parallel()
	ls := []string{words("a", 0, 6), words("b", 0, 6), words("c", 0, 6), words("d", 0, 6), words("e", 0, 6), words("f", 0, 6)}
	md := strings.Join(ls, "\n")
	// overlap 50%: merge threshold 10 tokens; each new chunk starts with the
	// last half (by characters) of the previous one — here its last line.
	cs := split(t, "general", md, chunk.Config{ChunkTokenNum: 20, Delimiter: "\n", OverlappedPercent: 50}, chunk.Options{})
	if len(cs) < 3 {
		t.Fatalf("got %q", contents(cs))
	}
	if cs[0].Content != ls[0]+"\n"+ls[1] { // 12 tokens > 10
		t.Fatalf("first chunk %q", cs[0].Content)
	}
	if cs[1].Content != ls[1]+"\n"+ls[2]+"\n"+ls[3] {
		t.Fatalf("second chunk %q", cs[1].Content)
	}
	for i := 1; i < len(cs); i++ {
		raw := []rune("\n" + cs[i-1].Content) // chunks are built as "\n"+section…
		tail := strings.TrimSpace(string(raw[len(raw)*50/100:]))
		if !strings.HasPrefix(cs[i].Content, tail+"\n") {
			t.Errorf("chunk %d does not start with the last half of chunk %d:\n%q\n%q", i, i-1, cs[i-1].Content, cs[i].Content)
		}
		if cs[i].StartChar >= cs[i-1].EndChar {
			t.Errorf("overlapping chunk %d located at %d, after the previous chunk's end %d", i, cs[i].StartChar, cs[i-1].EndChar)
		}
	}
	// 10%: the prefix is the last tenth of the previous chunk's characters.
	cs = split(t, "general", md, chunk.Config{ChunkTokenNum: 20, Delimiter: "\n", OverlappedPercent: 10}, chunk.Options{})
	raw := []rune("\n" + cs[0].Content)
	tail := strings.TrimSpace(string(raw[len(raw)*90/100:]))
	if !strings.HasPrefix(cs[1].Content, tail) || utf8.RuneCountInString(tail) == 0 {
		t.Fatalf("10%% overlap: chunk 1 %q does not start with %q", cs[1].Content, tail)
	}
	// No overlap: no line is repeated.
	cs = split(t, "general", md, chunk.Config{ChunkTokenNum: 20, Delimiter: "\n"}, chunk.Options{})
	if got := strings.Join(contents(cs), "\n"); got != md {
		t.Fatalf("without overlap the chunks do not tile the text: %q", contents(cs))
	}
}

func TestGeneralDelimiters(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		md, delim string
		want      []string
	}{
		{"custom delimiter is strict", "part one\nstill one\n---\npart two\n---\npart three", "`---`",
			[]string{"part one\nstill one", "part two", "part three"}},
		{"several custom delimiters, longest first", "a;;b;c;;;d", "`;;` `;;;`",
			[]string{"a", "b;c", "d"}},
		{"plain multi-character delimiter merges sections", "one##two##three", "##",
			[]string{"one\ntwo\nthree"}},
		{"crlf delimiter is per line", "one\r\ntwo\r\n\r\nthree", "\r\n",
			[]string{"one\ntwo\nthree"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := chunk.DefaultConfig()
			cfg.Delimiter = tc.delim
			if got := contents(split(t, "general", tc.md, cfg, chunk.Options{})); !equalStrings(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
