package docparse_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// minimalPDF writes a PDF with one page per entry of pages (Helvetica text;
// "" gives a page without content) and a correct cross-reference table.
// trailerExtra and extraObjs let a test add an /Encrypt dictionary.
func minimalPDF(pages []string, trailerExtra string, extraObjs ...string) []byte {
	var objs []string
	font := 3 + 2*len(pages)
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 3+2*i)
	}
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	for i, text := range pages {
		content := ""
		if text != "" {
			content = fmt.Sprintf("BT /F1 18 Tf 72 700 Td (%s) Tj ET", text)
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 %d 0 R >> >> >>", 4+2*i, font),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	}
	objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	objs = append(objs, extraObjs...)

	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, trailerExtra, xref)
	return []byte(b.String())
}

func TestPDFTextLayerExtracts(t *testing.T) {
	t.Parallel()
	p := docparse.New(docparse.NewPDFTextLayer(), docparse.Options{})
	res := mustParse(t, p, "two.pdf", minimalPDF([]string{"Hello PDF world", "Second page"}, ""))
	wantContains(t, res.Markdown, "<!-- page 1 -->", "Hello PDF world", "<!-- page 2 -->", "Second page")
	if res.Pages != 2 {
		t.Errorf("pages = %d", res.Pages)
	}
}

func TestPDFTextLayerPageWithoutText(t *testing.T) {
	t.Parallel()
	data := minimalPDF([]string{"Some text", ""}, "")
	_, err := parse(t, docparse.New(docparse.NewPDFTextLayer(), docparse.Options{}), "gap.pdf", data)
	wantCode(t, err, docparse.ErrOCRNotConfigured, "gap.pdf", "page 2 has no text layer")

	ocr := &fakeOCR{markdown: "all pages, recognised"}
	res := mustParse(t, docparse.New(docparse.NewPDFTextLayer(), docparse.Options{OCR: ocr}), "gap.pdf", data)
	wantEqual(t, res.Markdown, "all pages, recognised")
}

func TestPDFTextLayerErrors(t *testing.T) {
	t.Parallel()
	p := docparse.New(docparse.NewPDFTextLayer(), docparse.Options{})
	encrypted := minimalPDF([]string{"secret"}, "/Encrypt 5 0 R /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>] ",
		"<< /Filter /Standard /V 5 /R 6 /Length 256 /O <00> /U <00> /OE <00> /UE <00> /P -4 >>")
	_, err := parse(t, p, "locked.pdf", encrypted)
	wantCode(t, err, docparse.ErrEncrypted, "locked.pdf", "password")

	good := minimalPDF([]string{"x"}, "")
	_, err = parse(t, p, "cut.pdf", good[:len(good)/3])
	wantCode(t, err, docparse.ErrCorrupt, "cut.pdf")
}
