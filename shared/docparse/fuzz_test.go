package docparse_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// FuzzParse feeds arbitrary bytes under every extension: Parse must not
// panic, and every failure must be a coded error the edge can answer with.
// Run longer with:
//
//	go test -run XXX -fuzz FuzzParse -fuzztime 1m -fuzzminimizetime 2s ./shared/docparse
func FuzzParse(f *testing.F) {
	seeds := [][]byte{
		docxFile(f, wp(`<w:pStyle w:val="Heading1"/>`, wr("<w:b/>", "x"))+`<w:tbl><w:tr>`+cell(`<w:gridSpan w:val="2"/>`, "a")+`</w:tr></w:tbl>`, nil),
		pptxFile(f, []string{"r", relSlide, "slides/slide1.xml"}, `<p:sldId r:id="r"/>`,
			zipEntry{name: "ppt/slides/slide1.xml", data: []byte(slideXML(sp(`<p:ph type="title"/>`, ap("", ar("", "T")))))}),
		xlsxFile(f, `<sheet name="S" r:id="r1"/>`, []string{"r1", relSheet, "worksheets/sheet1.xml"},
			zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(sheetXML(`<row r="1"><c r="A1"><v>1</v></c></row>`, `<mergeCells><mergeCell ref="A1:C3"/></mergeCells>`))}),
		buildZip(f, files("index.md", "![](a.png)", "a.png", "\x89PNG\r\n\x1a\n")...),
		[]byte("a;b\n\"1;2\";3\n"),
		[]byte(`{"a":[1,{"b":null}]}`),
		[]byte("<h1>x</h1><table><tr><td>1</td></tr></table>"),
		pdfBytes,
	}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	exts := docparse.SupportedExtensions()
	ocr := &fakeOCR{markdown: "ocr text"}
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{"p"}}}, docparse.Options{OCR: ocr, MaxArchiveBytes: 8 << 20})
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		name := "fuzz" + exts[int(pick)%len(exts)]
		res, err := p.Parse(context.Background(), name, bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if _, ok := failure.As(err); !ok {
				t.Fatalf("%s: uncoded error %v", name, err)
			}
			return
		}
		if strings.TrimSpace(res.Markdown) == "" && len(res.Images) == 0 {
			t.Fatalf("%s: success without content", name)
		}
	})
}
