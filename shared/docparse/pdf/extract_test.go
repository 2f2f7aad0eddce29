package pdf

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func extract(t *testing.T, data []byte) Text {
	t.Helper()
	text, err := New().Extract(context.Background(), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	return text
}

func checkPage(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("page text:\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}
}

// The two-column fixture: a title centered across both columns, two
// columns of nine lines sharing baselines (written to the content stream
// row by row, as some producers do), a paragraph break in the left column,
// a word hyphenated across the column break, a centered page number.
func twoColumnLines() (left, right []string) {
	left = []string{
		"Left column opens the article and sets",
		"out the problem that reading order must",
		"solve for documents with two columns.",
		"Extraction that reads straight across",
		"the page would interleave both columns.",
		"A second paragraph in the left column",
		"keeps going until the column ends with",
		"a word that is broken across the exam-",
	}
	right = []string{
		"ple that the extractor must join again.",
		"The right column continues the text and",
		"must come after every line on the left.",
		"Its lines share their baselines with the",
		"left column, which is what makes it hard.",
		"A reader that sorts by baseline alone",
		"would mix the two columns line by line",
		"and the text would make no sense at all,",
		"even if every word in it were correct.",
	}
	return left, right
}

const twoColWant = `Reading Order in Two Column Layouts

Left column opens the article and sets
out the problem that reading order must
solve for documents with two columns.
Extraction that reads straight across
the page would interleave both columns.

A second paragraph in the left column
keeps going until the column ends with
a word that is broken across the example that the extractor must join again.
The right column continues the text and
must come after every line on the left.
Its lines share their baselines with the
left column, which is what makes it hard.
A reader that sorts by baseline alone
would mix the two columns line by line
and the text would make no sense at all,
even if every word in it were correct.

Page 1`

func twoColumnPage() page { return twoColumns(true) }

// twoColumns builds the fixture, with or without the paragraph gap in the
// left column.
func twoColumns(paragraphGap bool) page {
	l, r := twoColumnLines()
	second := 640.0
	if paragraphGap {
		second = 628
	}
	left := append(column(72, 700, 12, 10, l[:5]...), column(72, second, 12, 10, l[5:]...)...)
	right := column(300, 700, 12, 10, r...)
	runs := []run{{x: 119.5, y: 740, size: 18, text: "Reading Order in Two Column Layouts"}}
	runs = append(runs, interleave(left, right)...)
	runs = append(runs, run{x: 262, y: 60, size: 9, text: "Page 1"})
	return page{runs: runs}
}

func TestTwoColumnReadingOrder(t *testing.T) {
	t.Parallel()
	for _, compress := range []bool{false, true} {
		text := extract(t, buildPDF(t, []page{twoColumnPage()}, pdfOptions{compress: compress}))
		if len(text.Pages) != 1 || len(text.ScannedPages) != 0 {
			t.Fatalf("pages %d, scanned %v", len(text.Pages), text.ScannedPages)
		}
		got := text.Pages[0]
		checkPage(t, got, twoColWant)

		// The properties the exact text encodes, stated on their own.
		pos := func(s string) int {
			i := strings.Index(got, s)
			if i < 0 {
				t.Fatalf("%q missing", s)
			}
			return i
		}
		if pos("Reading Order") > pos("Left column opens") {
			t.Error("the spanning title does not come first")
		}
		if pos("even if every word") > pos("Page 1") {
			t.Error("the footer is not last")
		}
		lastLeft := pos("a word that is broken")
		_, right := twoColumnLines()
		for _, r := range right[1:] {
			if pos(r) < lastLeft {
				t.Errorf("right-column line %q precedes the end of the left column", r)
			}
		}
		for _, l := range strings.Split(got, "\n") {
			if strings.Contains(l, "Left column") && strings.Contains(l, "right column") {
				t.Errorf("line mixes both columns: %q", l)
			}
		}
	}
}

func TestSingleColumnParagraphsAndHyphenation(t *testing.T) {
	t.Parallel()
	lines := []string{
		"Single column text is read top to bottom.",
		"A hyphen at the end of a line that splits a",
		"word such as docu-",
		"ment is removed, but a compound like self-",
		"Reliance keeps it because the next line",
		"starts with a capital letter.",
	}
	runs := column(72, 720, 14, 11, lines...)
	runs = append(runs, column(72, 720-6*14-16, 14, 11,
		"After a larger gap a new paragraph starts,",
		"separated by a blank line.")...)
	// Content order scrambled: extraction must sort by position.
	runs[0], runs[3] = runs[3], runs[0]
	text := extract(t, buildPDF(t, []page{{runs: runs}}, pdfOptions{}))
	checkPage(t, text.Pages[0], `Single column text is read top to bottom.
A hyphen at the end of a line that splits a
word such as document is removed, but a compound like self-
Reliance keeps it because the next line
starts with a capital letter.

After a larger gap a new paragraph starts,
separated by a blank line.`)
}

func TestWordsFromPositionsNotSpaces(t *testing.T) {
	t.Parallel()
	// TJ arrays with a displacement between words and no space
	// characters, as TeX writes them; and words placed one by one.
	runs := []run{
		{x: 72, y: 700, size: 12, text: "kerned words need gaps", kerned: true},
		{x: 72, y: 680, size: 12, text: "placed"},
		{x: 72 + 40, y: 680, size: 12, text: "one"},
		{x: 72 + 66, y: 680, size: 12, text: "by"},
		{x: 72 + 82, y: 680, size: 12, text: "one"},
	}
	text := extract(t, buildPDF(t, []page{{runs: runs}}, pdfOptions{}))
	checkPage(t, text.Pages[0], "kerned words need gaps\nplaced one by one")
}

func TestMultiPageAndScanned(t *testing.T) {
	t.Parallel()
	pages := []page{
		{runs: column(72, 700, 14, 12, "First page.")},
		{image: true}, // a scan: an image and no text
		{runs: column(72, 700, 14, 12, "Third page, after the scan.")},
		{}, // blank
	}
	for _, compress := range []bool{false, true} {
		text := extract(t, buildPDF(t, pages, pdfOptions{compress: compress}))
		want := []string{"First page.", "", "Third page, after the scan.", ""}
		if len(text.Pages) != len(want) {
			t.Fatalf("got %d pages, want %d", len(text.Pages), len(want))
		}
		for i := range want {
			checkPage(t, text.Pages[i], want[i])
		}
		if got := text.ScannedPages; len(got) != 2 || got[0] != 2 || got[1] != 4 {
			t.Errorf("ScannedPages = %v, want [2 4]", got)
		}
		if text.Encrypted {
			t.Error("Encrypted set on a plain file")
		}
	}
}

func TestLigaturesAndControlCharacters(t *testing.T) {
	t.Parallel()
	runs := []run{{x: 72, y: 700, size: 12, text: "The \ufb01rst \ufb02ow of \x07\x1ffiles."}}
	text := extract(t, buildPDF(t, []page{{runs: runs}}, pdfOptions{}))
	checkPage(t, text.Pages[0], "The first flow of files.")
}

func TestCJKFromType0Font(t *testing.T) {
	t.Parallel()
	runs := []run{
		{x: 72, y: 700, size: 12, text: "中文文本提取", cjk: true},
		{x: 72, y: 680, size: 12, text: "不插入空格", cjk: true},
	}
	// Glyphs placed one by one with small gaps, as justified CJK text is.
	for i, r := range []rune("逐字定位") {
		runs = append(runs, run{x: 72 + float64(i)*14, y: 660, size: 12, text: string(r), cjk: true})
	}
	text := extract(t, buildPDF(t, []page{{runs: runs}}, pdfOptions{compress: true}))
	checkPage(t, text.Pages[0], "中文文本提取\n不插入空格\n逐字定位")
}

func TestEncryptedWithEmptyUserPassword(t *testing.T) {
	t.Parallel()
	for _, compress := range []bool{false, true} {
		data := buildPDF(t, []page{{runs: column(72, 700, 14, 12, "Secret but readable.")}}, pdfOptions{encrypt: true, keyBits: 128, compress: compress})
		if bytes.Contains(data, []byte("Secret")) {
			t.Fatal("fixture is not encrypted")
		}
		text := extract(t, data)
		if !text.Encrypted {
			t.Error("Encrypted not set")
		}
		checkPage(t, text.Pages[0], "Secret but readable.")
	}
}

func TestFormFieldValues(t *testing.T) {
	t.Parallel()
	p := page{runs: column(72, 700, 14, 12, "Name of the applicant:"), field: "Ada Lovelace"}
	text := extract(t, buildPDF(t, []page{p}, pdfOptions{compress: true}))
	checkPage(t, text.Pages[0], "Name of the applicant:\n\nAda Lovelace")
}
