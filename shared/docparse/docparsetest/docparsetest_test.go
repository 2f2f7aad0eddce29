package docparsetest_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/docparse/docparsetest"
)

// The builders are only useful if our parsers read them as intended: each
// document is parsed by shared/docparse (PDFs through the pure-Go
// extractor of shared/docparse/pdf) and its Markdown checked.

func parse(name string, data []byte) (docparse.Result, error) {
	p := docparse.New(docparse.NewPDFTextLayer(), docparse.Options{})
	return p.Parse(context.Background(), name, bytes.NewReader(data), int64(len(data)))
}

func mustParse(t *testing.T, name string, data []byte) docparse.Result {
	t.Helper()
	res, err := parse(name, data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return res
}

func wantMarkdown(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("Markdown mismatch\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}
}

func wantCode(t *testing.T, name string, data []byte, sentinel error, fragment string) {
	t.Helper()
	_, err := parse(name, data)
	if !errors.Is(err, sentinel) {
		t.Fatalf("Parse(%s) error = %v, want %v", name, err, sentinel)
	}
	if !strings.Contains(err.Error(), fragment) {
		t.Errorf("Parse(%s) error %q does not mention %q", name, err, fragment)
	}
}

func TestOfficeDocuments(t *testing.T) {
	t.Parallel()
	docx := docparsetest.DOCX(
		docparsetest.Heading(1, "Field Guide"),
		docparsetest.Paragraph("Owls & herons <nest> near water."),
		docparsetest.Heading(2, "Counts"),
		docparsetest.Table([]string{"Bird", "Count"}, []string{"Heron", "12"}),
	)
	wantMarkdown(t, mustParse(t, "guide.docx", docx).Markdown,
		"# Field Guide\n\nOwls & herons <nest> near water.\n\n## Counts\n\n| Bird | Count |\n| --- | --- |\n| Heron | 12 |")

	pptx := docparsetest.PPTX(
		docparsetest.Slide{Title: "Roadmap", Lines: []string{"Ship the parser", "Measure recall"}},
		docparsetest.Slide{Title: "Risks", Lines: []string{"Scanned PDFs"}},
	)
	res := mustParse(t, "deck.pptx", pptx)
	wantMarkdown(t, res.Markdown, "## Slide 1\n\n### Roadmap\n\n- Ship the parser\n- Measure recall\n\n## Slide 2\n\n### Risks\n\n- Scanned PDFs")
	if res.Pages != 2 {
		t.Errorf("pptx pages = %d", res.Pages)
	}

	xlsx := docparsetest.XLSX(
		docparsetest.Sheet{Name: "Stock", Rows: [][]string{{"Item", "Qty"}, {"Lantern", "3"}}},
		docparsetest.Sheet{Name: "Wide", Rows: [][]string{{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", "aa"}}},
	)
	md := mustParse(t, "stock.xlsx", xlsx).Markdown
	if !strings.HasPrefix(md, "## Stock\n\n| Item | Qty |\n| --- | --- |\n| Lantern | 3 |\n\n## Wide\n\n| a | b |") || !strings.Contains(md, "| z | aa |") {
		t.Errorf("xlsx Markdown:\n%s", md)
	}
}

func TestPDFs(t *testing.T) {
	t.Parallel()
	single := docparsetest.PDF(
		docparsetest.TextPage("Single column text is read top to bottom.", "It has (parentheses) and a backslash \\.",
			"Its lines are fourteen points apart.", "", "A new paragraph after a blank line."),
		docparsetest.TextPage("Second page."),
	)
	res := mustParse(t, "single.pdf", single)
	wantMarkdown(t, res.Markdown, "<!-- page 1 -->\n\nSingle column text is read top to bottom.\nIt has (parentheses) and a backslash \\.\n"+
		"Its lines are fourteen points apart.\n\nA new paragraph after a blank line.\n\n<!-- page 2 -->\n\nSecond page.")
	if res.Pages != 2 {
		t.Errorf("pages = %d", res.Pages)
	}

	left, right := columns()
	two := mustParse(t, "two.pdf", docparsetest.PDF(docparsetest.TwoColumnPage("Estuary Bird Survey of the Northern Coast", left, right))).Markdown
	want := "<!-- page 1 -->\n\nEstuary Bird Survey of the Northern Coast\n\n" + strings.Join(left, "\n") + "\n" + strings.Join(right, "\n")
	wantMarkdown(t, two, want)
}

func columns() (left, right []string) {
	left = []string{
		"Left column opens the survey and sets",
		"out the question the study must answer",
		"for every estuary along the coastline.",
		"Counting birds from boats along the",
		"shore misses most nests inland, so the",
		"team walked transects at dawn each day",
		"and wrote down every call they heard",
		"before the tide came in again at noon.",
	}
	right = []string{
		"Right column reports what they found.",
		"Herons nested in two of the estuaries",
		"and owls in three, more than expected.",
		"The counts agree with earlier surveys",
		"that used the same transects and the",
		"same hours, which makes them easy to",
		"compare from one year to the next one.",
		"Next year the team will add drones.",
	}
	return left, right
}

// A title (and a byline) centred across both columns covers the gutter
// with words and word spaces; wherever they fall, the columns are read one
// after the other. (Before the fix in pdf/layout.go, findGutters, about
// half of these placements read the columns across, line by line.)
func TestTwoColumnsWhereverTheTitleFalls(t *testing.T) {
	t.Parallel()
	left, right := columns()
	for _, byline := range []bool{false, true} {
		for _, size := range []float64{12, 16, 20} {
			for x := 100.0; x <= 250; x += 10 {
				p := docparsetest.TwoColumnPage("Estuary Bird Survey of the Northern Coast", left, right)
				p.Runs[0].X, p.Runs[0].Size = x, size
				if byline {
					by := docparsetest.Run{X: x + 13, Y: 722, Size: 11, Text: "Field notes by the coastal survey team, spring"}
					p.Runs = append([]docparsetest.Run{p.Runs[0], by}, p.Runs[1:]...)
				}
				md := mustParse(t, "two.pdf", docparsetest.PDF(p)).Markdown
				lastLeft, firstRight := strings.Index(md, left[len(left)-1]), strings.Index(md, right[0])
				if lastLeft < 0 || firstRight < 0 || lastLeft > firstRight {
					t.Errorf("title at x=%g, %gpt, byline %v: columns read across:\n%s", x, size, byline, md)
				}
			}
		}
	}
}

func TestBrokenPDFs(t *testing.T) {
	t.Parallel()
	enc := docparsetest.EncryptedPDF("s3cret", docparsetest.TextPage("Quarterly secrets nobody may read."))
	if bytes.Contains(enc, []byte("secrets")) || !bytes.Contains(enc, []byte("/Encrypt")) {
		t.Fatal("the encrypted PDF is not encrypted")
	}
	wantCode(t, "locked.pdf", enc, docparse.ErrEncrypted, "password")
	wantCode(t, "cut.pdf", docparsetest.CorruptPDF(), docparse.ErrCorrupt, "cut.pdf")
}

func TestBundlesAndArchives(t *testing.T) {
	t.Parallel()
	img := docparsetest.PNG()
	if _, err := png.Decode(bytes.NewReader(img)); err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	res := mustParse(t, "export.zip", docparsetest.MinerUBundle("# Survey\n\n![chart](images/chart.png)\n\nText.\n", map[string][]byte{"chart.png": img}))
	wantMarkdown(t, res.Markdown, "# Survey\n\n![chart](images/chart.png)\n\nText.\n")
	if len(res.Images) != 1 || res.Images[0].Name != "images/chart.png" || res.Images[0].ContentType != "image/png" || !bytes.Equal(res.Images[0].Data, img) {
		t.Errorf("images = %+v", res.Images)
	}

	wantCode(t, "slip.zip", docparsetest.ZipPathEscape(), docparse.ErrArchiveRejected, `"../x.md" points outside the archive`)
	bomb := docparsetest.ZipBomb(16 << 20)
	if len(bomb) > 64<<10 {
		t.Errorf("the bomb is %d bytes compressed", len(bomb))
	}
	wantCode(t, "bomb.zip", bomb, docparse.ErrArchiveRejected, "zip bomb")
	wantCode(t, "many.zip", docparsetest.ZipManyEntries(1001), docparse.ErrArchiveRejected, "1001 entries")
	if _, err := parse("few.zip", docparsetest.ZipManyEntries(20)); err != nil {
		t.Errorf("a bundle of 20 entries: %v", err)
	}
}
