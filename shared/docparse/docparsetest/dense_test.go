package docparsetest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
)

// DensePDF is read page by page: the running title, then 112 lines of about
// eight words (a reader that mixed the columns along their shared baselines
// would give 56 long ones); the same arguments give the same file.
func TestDensePDF(t *testing.T) {
	t.Parallel()
	data := docparsetest.DensePDF(3, 7)
	if !bytes.Equal(data, docparsetest.DensePDF(3, 7)) {
		t.Fatal("DensePDF(3, 7) differs between calls")
	}
	if bytes.Equal(data, docparsetest.DensePDF(3, 8)) {
		t.Fatal("DensePDF ignores its seed")
	}
	res := mustParse(t, "dense.pdf", data)
	if res.Pages != 3 {
		t.Fatalf("pages = %d, want 3", res.Pages)
	}
	pages := strings.Split(res.Markdown, "<!-- page ")
	if len(pages) != 4 {
		t.Fatalf("%d page markers in the Markdown, want 3", len(pages)-1)
	}
	for i, p := range pages[1:] {
		lines := strings.Split(strings.TrimSpace(p), "\n")
		var text []string
		for _, l := range lines[1:] {
			if l = strings.TrimSpace(l); l != "" {
				text = append(text, l)
			}
		}
		if want := "Generated benchmark document, page " + string(rune('1'+i)); len(text) == 0 || text[0] != want {
			t.Fatalf("page %d starts with %q, want %q", i+1, text[:min(1, len(text))], want)
		}
		if len(text) != 1+2*56 { // title + both columns, line by line
			t.Fatalf("page %d has %d lines of text, want the title and 2×56 column lines", i+1, len(text))
		}
		words := len(strings.Fields(strings.Join(text[1:], " ")))
		if words < 700 || words > 1100 {
			t.Errorf("page %d has %d words, want about 900", i+1, words)
		}
	}
}
