package docparse_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// BenchmarkParse measures conversion throughput on generated documents of a
// few hundred KiB, for `make bench` to compare against a plain read.
func BenchmarkParse(b *testing.B) {
	var body, rows, csv strings.Builder
	csv.WriteString("id,name,score\n")
	for i := range 2000 {
		body.WriteString(wp("", wr("", fmt.Sprintf("Paragraph %d with ", i))+wr("<w:b/>", "bold")+wr("", " text.")))
		rows.WriteString(fmt.Sprintf(`<row r="%d"><c r="A%d"><v>%d</v></c><c r="B%d" t="inlineStr"><is><t>name %d</t></is></c></row>`, i+1, i+1, i, i+1, i))
		fmt.Fprintf(&csv, "%d,name %d,%d\n", i, i, i%100)
	}
	docs := []struct {
		name string
		data []byte
	}{
		{"doc.docx", docxFile(b, body.String(), nil)},
		{"sheet.xlsx", xlsxFile(b, `<sheet name="S" r:id="r1"/>`, []string{"r1", relSheet, "worksheets/sheet1.xml"},
			zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(sheetXML(rows.String(), ""))})},
		{"rows.csv", []byte(csv.String())},
		{"notes.md", bytes.Repeat([]byte("# Heading\n\nSome text.\n\n"), 10000)},
	}
	p := docparse.New(nil, docparse.Options{})
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.data)))
			for b.Loop() {
				if _, err := p.Parse(b.Context(), d.name, bytes.NewReader(d.data), int64(len(d.data))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
