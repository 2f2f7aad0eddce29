package chunk_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/chunk"
)

func TestSeparatorSections(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		md    string
		delim string
		want  []string
	}{
		{"every line is a chunk, however short", "alpha\nbeta\n\n  gamma  \n", "\n",
			[]string{"alpha", "beta", "gamma"}},
		{"paragraph delimiter keeps lines together", "row 1\nrow 2\n\nrow 3", "\n\n",
			[]string{"row 1\nrow 2", "row 3"}},
		{"spreadsheet rows", "| 姓名 | 年龄 |\n| 张三 | 30 |\n| 李四 | 25 |", "\n",
			[]string{"| 姓名 | 年龄 |", "| 张三 | 30 |", "| 李四 | 25 |"}},
		{"custom delimiter", "a;;b\nc;;d", "`;;`", []string{"a", "b\nc", "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := chunk.DefaultConfig()
			cfg.Delimiter = tc.delim
			cs := split(t, "separator", tc.md, cfg, chunk.Options{})
			if got := contents(cs); !equalStrings(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for _, c := range cs {
				if source(tc.md, c) != c.Content {
					t.Errorf("chunk %d located at %q", c.Index, source(tc.md, c))
				}
			}
		})
	}
}

// Only a section over chunk_token_num is cut, into windows of at most N
// tokens that overlap by overlapped_percent × N tokens and never cut a word.
func TestSeparatorLongSectionWindows(t *testing.T) {
	t.Parallel()
	long := words("w", 0, 100)
	md := "short line\n" + long + "\nlast line"
	cases := []struct {
		overlap int
		windows [][2]int // word ranges
	}{
		{0, [][2]int{{0, 30}, {30, 60}, {60, 90}, {90, 100}}},
		{20, [][2]int{{0, 30}, {24, 54}, {48, 78}, {72, 100}}}, // 6-token overlap
		{50, [][2]int{{0, 30}, {15, 45}, {30, 60}, {45, 75}, {60, 90}, {75, 100}}},
	}
	for _, tc := range cases {
		cfg := chunk.Config{ChunkTokenNum: 30, Delimiter: "\n", OverlappedPercent: tc.overlap}
		cs := split(t, "separator", md, cfg, chunk.Options{})
		maxTokens(t, cs, 30)
		want := []string{"short line"}
		for _, w := range tc.windows {
			want = append(want, words("w", w[0], w[1]-w[0]))
		}
		want = append(want, "last line")
		if got := contents(cs); !equalStrings(got, want) {
			t.Fatalf("overlap %d%%:\ngot  %q\nwant %q", tc.overlap, got, want)
		}
	}
}

func TestSeparatorChineseWindows(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("检索增强生成需要可靠的分块。", 20) // 260 tokens
	cs := split(t, "separator", line, cfgN(64), chunk.Options{})
	maxTokens(t, cs, 64)
	if strings.Join(contents(cs), "") != line {
		t.Fatal("windows without overlap do not tile the section")
	}
	for _, c := range cs[1:] {
		if strings.HasPrefix(c.Content, "。") {
			t.Errorf("window %d starts with punctuation", c.Index)
		}
	}
}
