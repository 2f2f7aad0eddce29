package pdf

import "testing"

// glyphs lays out text on a baseline from x, each rune one advance of w
// (size 10), with gap extra between runes; ' ' leaves a blank advance.
func glyphs(x, y, w, gap float64, text string) []glyph {
	var gs []glyph
	for _, r := range text {
		if r != ' ' {
			gs = append(gs, glyph{x: x, y: y, w: w, size: 10, text: string(r)})
		}
		x += w + gap
	}
	return gs
}

func TestLayoutCJKWithoutSpaces(t *testing.T) {
	t.Parallel()
	var gs []glyph
	// Justified CJK: full-width glyphs spread with 0.3 em between them,
	// more than the word gap, yet no space belongs between them.
	gs = append(gs, glyphs(100, 700, 10, 3, "中文排版")...)
	// Latin after CJK with a real gap keeps its space; "Go" itself is tight.
	gs = append(gs, glyphs(100+4*13+3, 700, 5, 0, "Go")...)
	gs = append(gs, glyphs(100+4*13+3+10+3, 700, 10, 0, "语言。")...)
	// Japanese and Korean on the next lines.
	gs = append(gs, glyphs(100, 686, 10, 2.5, "日本語のテキスト")...)
	gs = append(gs, glyphs(100, 672, 10, 2.5, "한국어")...)
	var l layout
	got := l.page(gs)
	want := "中文排版 Go 语言。\n日本語のテキスト\n한국어"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLayoutSuperscriptStaysOnItsLine(t *testing.T) {
	t.Parallel()
	gs := glyphs(100, 700, 5, 0, "E = mc")
	gs = append(gs, glyph{x: 130, y: 703.5, w: 3.5, size: 7, text: "2"})
	gs = append(gs, glyphs(100, 686, 5, 0, "next line")...)
	var l layout
	if got, want := l.page(gs), "E = mc2\nnext line"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLayoutOverprintedBoldIsNotDoubled(t *testing.T) {
	t.Parallel()
	// Fake bold: the same word drawn twice, offset by a fraction of a point.
	gs := glyphs(100, 700, 5, 0, "Bold")
	gs = append(gs, glyphs(100.3, 700, 5, 0, "Bold")...)
	gs = append(gs, glyphs(125, 700, 5, 0, "text")...)
	var l layout
	if got, want := l.page(gs), "Bold text"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRotatedTextFollowsMainText(t *testing.T) {
	t.Parallel()
	runs := column(72, 700, 14, 12, "Main text comes first.", "It has two lines.")
	runs = append(runs, run{x: 40, y: 300, size: 9, text: "A label running up the margin", rotated: true})
	text := extract(t, buildPDF(t, []page{{runs: runs}}, pdfOptions{}))
	checkPage(t, text.Pages[0], "Main text comes first.\nIt has two lines.\n\nA label running up the margin")
}
