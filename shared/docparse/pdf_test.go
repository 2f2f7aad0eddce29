package docparse_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// fakePDF is a scripted PDFExtractor.
type fakePDF struct {
	text docparse.PDFText
	err  error
}

func (f fakePDF) Extract(ctx context.Context, r io.ReaderAt, size int64) (docparse.PDFText, error) {
	head := make([]byte, 5)
	if _, err := r.ReadAt(head, 0); err != nil || string(head) != "%PDF-" {
		return docparse.PDFText{}, errors.New("extractor got the wrong bytes")
	}
	return f.text, f.err
}

// fakeOCR records its calls and answers from a script.
type fakeOCR struct {
	markdown string
	images   []docparse.Image
	err      error
	calls    atomic.Int32
	lastName atomic.Value
}

func (f *fakeOCR) Recognize(ctx context.Context, filename string, data []byte) (string, error) {
	f.calls.Add(1)
	f.lastName.Store(filename)
	return f.markdown, f.err
}

// fakeImageOCR also returns figures.
type fakeImageOCR struct{ fakeOCR }

func (f *fakeImageOCR) RecognizeImages(ctx context.Context, filename string, data []byte) (string, []docparse.Image, error) {
	md, err := f.Recognize(ctx, filename, data)
	return md, f.images, err
}

var pdfBytes = []byte("%PDF-1.7\n1 0 obj<<>>endobj\n%%EOF")

func TestPDFTextLayerWithPageMarkers(t *testing.T) {
	t.Parallel()
	ocr := &fakeOCR{markdown: "never used"}
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{"# Intro\r\n\r\nFirst page.", "", "  Third page.  "}}},
		docparse.Options{OCR: ocr, OCREngine: docparse.EngineMinerU})
	res := mustParse(t, p, "paper.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "<!-- page 1 -->\n\n# Intro\n\nFirst page.\n\n<!-- page 2 -->\n\n<!-- page 3 -->\n\nThird page.")
	if res.Pages != 3 || res.Format != "pdf" {
		t.Errorf("pages=%d format=%q", res.Pages, res.Format)
	}
	if n := ocr.calls.Load(); n != 0 {
		t.Errorf("OCR called %d times for a PDF with a text layer", n)
	}
}

func TestPDFScannedPagesNeedOCR(t *testing.T) {
	t.Parallel()
	text := docparse.PDFText{Pages: []string{"cover text", "", "", "", "end"}, ScannedPages: []int{2, 3, 4}}
	_, err := parse(t, docparse.New(fakePDF{text: text}, docparse.Options{}), "scan.pdf", pdfBytes)
	fe := wantCode(t, err, docparse.ErrOCRNotConfigured, "scan.pdf", "pages 2-4 have no text layer", "Settings → OCR", "mineru_ocr")
	if got, _ := fe.Details["pages"].([]int); !slices.Equal(got, []int{2, 3, 4}) {
		t.Errorf("Details[pages] = %v", fe.Details["pages"])
	}

	all := docparse.PDFText{Pages: []string{"", ""}, ScannedPages: []int{1, 2}}
	_, err = parse(t, docparse.New(fakePDF{text: all}, docparse.Options{}), "fax.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrOCRNotConfigured, "no page has a text layer")
}

func TestPDFScannedPagesGoToOCR(t *testing.T) {
	t.Parallel()
	ocr := &fakeImageOCR{fakeOCR{markdown: "\n# OCR title\n\n![](images/fig.jpg)\n", images: []docparse.Image{{Name: "images/fig.jpg", Data: jpegBytes("fig")}}}}
	text := docparse.PDFText{Pages: []string{"", "some text"}, ScannedPages: []int{1}}
	res := mustParse(t, docparse.New(fakePDF{text: text}, docparse.Options{OCR: ocr}), "dir/scan.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "# OCR title\n\n![](images/fig.jpg)")
	if res.Pages != 2 || len(res.Images) != 1 || res.Images[0].ContentType != "image/jpeg" {
		t.Errorf("pages=%d images=%+v", res.Pages, res.Images)
	}
	if got := ocr.lastName.Load(); got != "scan.pdf" {
		t.Errorf("OCR got filename %v", got)
	}
}

func TestPDFOCRDisabledKeepsTheTextLayer(t *testing.T) {
	t.Parallel()
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{"text", ""}, ScannedPages: []int{2}}}, docparse.Options{OCREngine: docparse.EngineDisable})
	res := mustParse(t, p, "mixed.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "<!-- page 1 -->\n\ntext\n\n<!-- page 2 -->")
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "pages 2") {
		t.Errorf("warnings = %v", res.Warnings)
	}

	allScanned := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{""}, ScannedPages: []int{1}}}, docparse.Options{OCREngine: docparse.EngineDisable})
	_, err := parse(t, allScanned, "scan.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrOCRNotConfigured, "no page has a text layer")
}

func TestPDFFailures(t *testing.T) {
	t.Parallel()
	_, err := parse(t, docparse.New(fakePDF{text: docparse.PDFText{Encrypted: true}}, docparse.Options{}), "locked.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrEncrypted, "locked.pdf", "password")

	_, err = parse(t, docparse.New(fakePDF{err: errors.New("xref table not found")}, docparse.Options{}), "broken.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrCorrupt, "broken.pdf", "xref table not found")

	passthrough := docparse.New(fakePDF{err: docparse.ErrEncrypted}, docparse.Options{})
	_, err = parse(t, passthrough, "x.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrEncrypted)

	_, err = parse(t, docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{" ", ""}}}, docparse.Options{}), "blank.pdf", pdfBytes)
	wantCode(t, err, docparse.ErrEmpty, "blank.pdf")

	_, err = parse(t, docparse.New(fakePDF{}, docparse.Options{}), "fake.pdf", []byte("<html>not a pdf"))
	wantCode(t, err, docparse.ErrWrongType, "fake.pdf")
}

func TestPDFWithoutExtractorUsesOCR(t *testing.T) {
	t.Parallel()
	ocr := &fakeOCR{markdown: "from ocr"}
	res := mustParse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "a.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "from ocr")

	if _, err := parse(t, docparse.New(nil, docparse.Options{}), "a.pdf", pdfBytes); err == nil {
		t.Fatal("no extractor and no OCR: want an error")
	}
}
