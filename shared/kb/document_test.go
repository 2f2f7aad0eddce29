package kb_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kb"
)

// doc returns n lines "line 1" … "line n", with the given lines replaced.
func doc(n int, replace map[int]string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		l := fmt.Sprintf("line %d", i)
		if r, ok := replace[i]; ok {
			l = r
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// numberedLines is the tools' rendering of lines from..to of doc(n, replace).
func numberedLines(from, to int, replace map[int]string) string {
	var out []string
	for i := from; i <= to; i++ {
		l := fmt.Sprintf("line %d", i)
		if r, ok := replace[i]; ok {
			l = r
		}
		out = append(out, fmt.Sprintf("%6d\t%s", i, l))
	}
	return strings.Join(out, "\n")
}

func TestOpenWindow(t *testing.T) {
	t.Parallel()
	md := doc(5, nil)
	cases := []struct {
		name                 string
		line, offset, window int
		start, end, off      int
		before, after        bool
		next                 *int
	}{
		{"whole document by default", 0, 0, 0, 1, 5, 0, false, false, nil},
		{"offset and window", 0, 1, 2, 2, 3, 1, true, true, intp(3)},
		{"window reaching the end", 0, 3, 2, 4, 5, 3, true, false, nil},
		{"line wins over offset", 4, 1, 10, 4, 5, 3, true, false, nil},
		{"first line", 1, 3, 1, 1, 1, 0, false, true, intp(1)},
		{"last line", 0, 4, 2000, 5, 5, 4, true, false, nil},
	}
	for _, c := range cases {
		w, err := kb.OpenWindow("kb1", "f1", md, c.line, c.offset, c.window)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantWindow := c.window
		if wantWindow == 0 {
			wantWindow = kb.DefaultOpenWindow
		}
		if w.KBID != "kb1" || w.FileID != "f1" || w.StartLine != c.start || w.EndLine != c.end || w.TotalLines != 5 ||
			w.Offset != c.off || w.WindowSize != wantWindow || w.HasMoreBefore != c.before || w.HasMoreAfter != c.after ||
			(w.NextOffset == nil) != (c.next == nil) || (c.next != nil && *w.NextOffset != *c.next) {
			t.Fatalf("%s: window = %+v (next %v)", c.name, w, w.NextOffset)
		}
		if want := numberedLines(c.start, c.end, nil); w.Content != want {
			t.Fatalf("%s: content = %q, want %q", c.name, w.Content, want)
		}
	}

	// Line numbers are right-aligned to six columns; CRLF and a trailing
	// newline do not make lines; blank lines count.
	w, err := kb.OpenWindow("kb1", "f1", "a\r\n\r\nc", 0, 0, 0)
	if err != nil || w.TotalLines != 3 || w.Content != "     1\ta\n     2\t\n     3\tc" {
		t.Fatalf("CRLF document = %+v, %v", w, err)
	}
	w, err = kb.OpenWindow("kb1", "f1", doc(12, nil), 10, 0, 1)
	if err != nil || w.Content != "    10\tline 10" {
		t.Fatalf("line 10 = %q, %v", w.Content, err)
	}
	w, err = kb.OpenWindow("kb1", "f1", "", 0, 0, 0)
	if err != nil || w.TotalLines != 0 || w.StartLine != 0 || w.EndLine != 0 || w.Content != "" || w.HasMoreAfter || w.NextOffset != nil {
		t.Fatalf("empty document = %+v, %v", w, err)
	}

	for _, c := range []struct {
		name                 string
		line, offset, window int
		code                 string
	}{
		{"window too large", 0, 0, kb.MaxOpenWindow + 1, "invalid_window"},
		{"negative window", 0, 0, -1, "invalid_window"},
		{"negative line", -1, 0, 10, "invalid_window"},
		{"negative offset", 0, -1, 10, "invalid_window"},
		{"offset past the end", 0, 5, 10, "offset_out_of_range"},
		{"line past the end", 6, 0, 10, "offset_out_of_range"},
	} {
		_, err := kb.OpenWindow("kb1", "f1", md, c.line, c.offset, c.window)
		fe, ok := failure.As(err)
		if !ok || fe.Kind != failure.KindUnprocessable || fe.Code != c.code {
			t.Errorf("%s: error %v, want 422 %s", c.name, err, c.code)
		}
	}
}

func intp(i int) *int { return &i }

func TestFind(t *testing.T) {
	t.Parallel()
	marked := map[int]string{3: "a Needle here", 5: "NEEDLE again", 20: "needle 20", 28: "the needle 28"}
	md := doc(30, marked)
	find := func(o kb.FindOptions) kb.FindResult {
		t.Helper()
		res, err := kb.Find("kb1", "f1", md, o)
		if err != nil {
			t.Fatalf("Find(%+v): %v", o, err)
		}
		return res
	}
	type win struct {
		start, end int
		matched    []int
	}
	check := func(what string, res kb.FindResult, total int, want []win) {
		t.Helper()
		if res.TotalMatches != total || len(res.Windows) != len(want) {
			t.Fatalf("%s: %d matches, %d windows %+v; want %d, %d", what, res.TotalMatches, len(res.Windows), res.Windows, total, len(want))
		}
		for i, w := range want {
			got := res.Windows[i]
			if got.StartLine != w.start || got.EndLine != w.end || !slices.Equal(got.MatchedLines, w.matched) {
				t.Fatalf("%s: window %d = %d–%d %v, want %d–%d %v", what, i, got.StartLine, got.EndLine, got.MatchedLines, w.start, w.end, w.matched)
			}
			if got.Content != numberedLines(w.start, w.end, marked) {
				t.Fatalf("%s: window %d content = %q", what, i, got.Content)
			}
		}
	}

	// Windows of 6 lines put 3 lines before their first match.
	res := find(kb.FindOptions{Patterns: []string{"needle"}, WindowSize: 6})
	if res.KBID != "kb1" || res.FileID != "f1" || res.Semantic || res.MatchMode != "keyword" {
		t.Fatalf("result header = %+v", res)
	}
	check("keyword", res, 4, []win{{1, 6, []int{3, 5}}, {17, 22, []int{20}}, {25, 30, []int{28}}})

	// max_windows bounds the windows, not the matches counted, and the last
	// window still lists every match inside it.
	check("max_windows 1", find(kb.FindOptions{Patterns: []string{"needle"}, WindowSize: 6, MaxWindows: 1}), 4,
		[]win{{1, 6, []int{3, 5}}})
	check("case sensitive", find(kb.FindOptions{Patterns: []string{"Needle", "NEEDLE"}, CaseSensitive: true, WindowSize: 2}), 2,
		[]win{{2, 3, []int{3}}, {4, 5, []int{5}}})
	// Windows never overlap: the second starts after the first ends.
	check("adjacent matches", find(kb.FindOptions{Patterns: []string{"line 7", "line 9"}, WindowSize: 6}), 2,
		[]win{{4, 9, []int{7, 9}}})
	check("clamped start", find(kb.FindOptions{Patterns: []string{"line 4", "line 8"}, WindowSize: 6}), 2,
		[]win{{1, 6, []int{4}}, {7, 12, []int{8}}})
	check("defaults", find(kb.FindOptions{Patterns: []string{"needle"}}), 4, []win{{1, 30, []int{3, 5, 20, 28}}})
	check("no match", find(kb.FindOptions{Patterns: []string{"haystack"}}), 0, nil)
	if res := find(kb.FindOptions{Patterns: []string{"haystack"}}); res.Windows == nil {
		t.Fatal("no windows must encode as [] not null")
	}

	res = find(kb.FindOptions{Patterns: []string{`^needle \d+$`, `needle 2[0-9]$`}, UseRegex: true, WindowSize: 1})
	if res.MatchMode != "regex" {
		t.Fatalf("match_mode = %q", res.MatchMode)
	}
	check("regex", res, 2, []win{{20, 20, []int{20}}, {28, 28, []int{28}}})
	check("regex case sensitive", find(kb.FindOptions{Patterns: []string{`^NEEDLE`}, UseRegex: true, CaseSensitive: true, WindowSize: 1}), 1,
		[]win{{5, 5, []int{5}}})
	check("regex metacharacters as keyword", find(kb.FindOptions{Patterns: []string{`needle \d+`}}), 0, nil)

	for _, c := range []struct {
		name string
		o    kb.FindOptions
		code string
	}{
		{"no patterns", kb.FindOptions{}, "invalid_patterns"},
		{"blank pattern", kb.FindOptions{Patterns: []string{"needle", "  "}}, "invalid_patterns"},
		{"long pattern", kb.FindOptions{Patterns: []string{strings.Repeat("x", 501)}}, "invalid_patterns"},
		{"invalid regex", kb.FindOptions{Patterns: []string{"needle("}, UseRegex: true}, "invalid_patterns"},
		{"max_windows", kb.FindOptions{Patterns: []string{"x"}, MaxWindows: 21}, "invalid_window"},
		{"window_size", kb.FindOptions{Patterns: []string{"x"}, WindowSize: 201}, "invalid_window"},
		{"negative window_size", kb.FindOptions{Patterns: []string{"x"}, WindowSize: -1}, "invalid_window"},
	} {
		_, err := kb.Find("kb1", "f1", md, c.o)
		fe, ok := failure.As(err)
		if !ok || fe.Kind != failure.KindUnprocessable || fe.Code != c.code {
			t.Errorf("%s: error %v, want 422 %s", c.name, err, c.code)
		}
	}
	// An invalid regular expression is fine as a keyword.
	check("parenthesis keyword", find(kb.FindOptions{Patterns: []string{"needle("}}), 0, nil)
}
