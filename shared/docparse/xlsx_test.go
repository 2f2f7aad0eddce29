package docparse_test

import (
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func sheetXML(rows string, extra string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><worksheet ` + nsSheet + `><sheetData>` + rows + `</sheetData>` + extra + `</worksheet>`
}

func xlsxFile(t testing.TB, sheets string, wbRels []string, extra ...zipEntry) []byte {
	t.Helper()
	return buildZip(t, append(files(
		"[Content_Types].xml", contentTypes,
		"_rels/.rels", relsXML("rId1", relDoc, "xl/workbook.xml"),
		"xl/workbook.xml", `<workbook `+nsSheet+`><workbookPr/><sheets>`+sheets+`</sheets></workbook>`,
		"xl/_rels/workbook.xml.rels", relsXML(wbRels...),
	), extra...)...)
}

const xlsxStyles = `<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">` +
	`<numFmts count="2"><numFmt numFmtId="164" formatCode="yyyy/mm/dd\ hh:mm"/><numFmt numFmtId="165" formatCode="&quot;Days&quot; 0.00"/></numFmts>` +
	`<cellXfs count="5"><xf numFmtId="0"/><xf numFmtId="14"/><xf numFmtId="164"/><xf numFmtId="165"/><xf numFmtId="2"/></cellXfs></styleSheet>`

func TestXLSXSheets(t *testing.T) {
	t.Parallel()
	sst := `<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">` +
		`<si><t>Product</t></si><si><t>Price</t></si><si><r><t>Rich </t></r><r><rPr><b/></rPr><t>text</t></r><rPh><t>ruby</t></rPh></si>` +
		`<si><t>a|b</t></si><si><t>Region</t></si></sst>`
	sheet1 := sheetXML(
		`<row r="1"><c r="A1" t="s"><v>0</v></c><c r="C1" t="s"><v>1</v></c><c r="D1" t="inlineStr"><is><t>In stock</t></is></c><c r="E1" t="inlineStr"><is><t>Added</t></is></c></row>`+
			`<row r="2"><c r="A2" t="s"><v>2</v></c><c r="C2"><v>19.899999999999999</v></c><c r="D2" t="b"><v>1</v></c><c r="E2" s="1"><v>45292</v></c></row>`+
			`<row r="3"/>`+
			`<row r="4"><c r="A4" t="s"><v>3</v></c><c r="C4" s="4"><v>1234567890123</v></c><c r="D4" t="b"><v>0</v></c><c r="E4" s="2"><v>45292.5</v></c><c r="F4"><f>SUM(1)</f><v></v></c></row>`+
			`<row r="5"><c r="A5" t="str"><v>formula text</v></c><c r="C5" t="e"><v>#DIV/0!</v></c><c r="E5" s="3"><v>3</v></c></row>`,
		"")
	sheet2 := sheetXML(
		`<row r="2"><c r="B2" t="s"><v>4</v></c><c r="C2" t="inlineStr"><is><t>Q1</t></is></c></row>`+
			`<row r="3"><c r="B3" t="inlineStr"><is><t>North</t></is></c><c r="C3"><v>1e-7</v></c></row>`+
			`<row r="4"><c r="C4"><v>2.5E+20</v></c></row>`,
		`<mergeCells count="1"><mergeCell ref="B3:B4"/></mergeCells>`)
	data := xlsxFile(t,
		`<sheet name="Products" sheetId="1" r:id="rId1"/><sheet name="Empty" sheetId="2" r:id="rId2"/>`+
			`<sheet name="Chart" sheetId="3" r:id="rId3"/><sheet name="Regions" sheetId="4" state="hidden" r:id="rId4"/>`,
		[]string{"rId1", relSheet, "worksheets/sheet1.xml", "rId2", relSheet, "worksheets/sheet2.xml",
			"rId3", relChart, "chartsheets/sheet1.xml", "rId4", relSheet, "/xl/worksheets/sheet3.xml",
			"rIdS", relSST, "sharedStrings.xml", "rIdT", relStyles, "styles.xml"},
		zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(sheet1)},
		zipEntry{name: "xl/worksheets/sheet2.xml", data: []byte(sheetXML(`<row r="1"><c r="A1"><v></v></c></row>`, ""))},
		zipEntry{name: "xl/chartsheets/sheet1.xml", data: []byte(`<chartsheet/>`)},
		zipEntry{name: "xl/worksheets/sheet3.xml", data: []byte(sheet2)},
		zipEntry{name: "xl/sharedStrings.xml", data: []byte(sst)},
		zipEntry{name: "xl/styles.xml", data: []byte(xlsxStyles)},
	)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "stock.xlsx", data)
	want := strings.Join([]string{
		"## Products",
		"| Product | Price | In stock | Added |\n| --- | --- | --- | --- |\n" +
			"| Rich text | 19.9 | TRUE | 2024-01-01 |\n" +
			"| a\\|b | 1234567890123 | FALSE | 2024-01-01 12:00:00 |\n" +
			"| formula text | #DIV/0! |  | 3 |",
		"## Regions",
		"| Region | Q1 |\n| --- | --- |\n| North | 1e-07 |\n| North | 2.5e+20 |",
	}, "\n\n")
	wantEqual(t, res.Markdown, want)
	if res.Format != "xlsx" || res.Pages != 0 || len(res.Images) != 0 {
		t.Errorf("format=%q pages=%d images=%d", res.Format, res.Pages, len(res.Images))
	}
}

func TestXLSXRowLimit(t *testing.T) {
	t.Parallel()
	var rows strings.Builder
	for i := 1; i <= 6; i++ {
		n := string(rune('0' + i))
		rows.WriteString(`<row r="` + n + `"><c r="A` + n + `"><v>` + n + `</v></c></row>`)
	}
	data := xlsxFile(t, `<sheet name="Big" r:id="r1"/>`, []string{"r1", relSheet, "worksheets/sheet1.xml"},
		zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(sheetXML(rows.String(), ""))})
	res := mustParse(t, docparse.New(nil, docparse.Options{MaxTableRows: 3}), "big.xlsx", data)
	wantEqual(t, res.Markdown, "## Big\n\n| 1 |\n| --- |\n| 2 |\n| 3 |\n\n_(3 more rows not shown: the limit is 3 rows per sheet)_")
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], `"Big"`) {
		t.Errorf("warnings = %v", res.Warnings)
	}
}

func TestXLSXAllSheetsEmpty(t *testing.T) {
	t.Parallel()
	data := xlsxFile(t, `<sheet name="S" r:id="r1"/>`, []string{"r1", relSheet, "worksheets/sheet1.xml"},
		zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(sheetXML(`<row r="1"><c r="A1" t="inlineStr"><is><t> </t></is></c></row>`, ""))})
	_, err := parse(t, docparse.New(nil, docparse.Options{}), "blank.xlsx", data)
	wantCode(t, err, docparse.ErrEmpty, "blank.xlsx")
}

func TestXLSXBadSheetXMLIsCorrupt(t *testing.T) {
	t.Parallel()
	data := xlsxFile(t, `<sheet name="S" r:id="r1"/>`, []string{"r1", relSheet, "worksheets/sheet1.xml"},
		zipEntry{name: "xl/worksheets/sheet1.xml", data: []byte(`<worksheet><sheetData><row><c><v>1</v></row>`)})
	_, err := parse(t, docparse.New(nil, docparse.Options{}), "bad.xlsx", data)
	wantCode(t, err, docparse.ErrCorrupt, "bad.xlsx", "xl/worksheets/sheet1.xml")
}
