package docparse_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

const docxStyles = `<?xml version="1.0" encoding="UTF-8"?><w:styles ` + nsDecl + `>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>
<w:style w:type="paragraph" w:styleId="2"><w:name w:val="heading 2"/></w:style>
<w:style w:type="paragraph" w:styleId="MyChapter"><w:name w:val="My Chapter"/><w:basedOn w:val="Heading1"/></w:style>
<w:style w:type="paragraph" w:styleId="ListBullet"><w:name w:val="List Bullet"/><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr></w:pPr></w:style>
</w:styles>`

const docxNumbering = `<?xml version="1.0" encoding="UTF-8"?><w:numbering ` + nsDecl + `>
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/></w:lvl><w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/></w:lvl></w:abstractNum>
<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
</w:numbering>`

func numPr(numID, ilvl string) string {
	return `<w:numPr><w:ilvl w:val="` + ilvl + `"/><w:numId w:val="` + numID + `"/></w:numPr>`
}

func cell(props, text string) string {
	if props != "" {
		props = "<w:tcPr>" + props + "</w:tcPr>"
	}
	return "<w:tc>" + props + wp("", wr("", text)) + "</w:tc>"
}

func drawing(relID, descr string) string {
	return `<w:r><w:drawing><wp:inline><wp:docPr id="1" name="Picture" descr="` + descr + `"/><a:graphic><a:graphicData>` +
		`<pic:pic><pic:blipFill><a:blip r:embed="` + relID + `"/></pic:blipFill></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r>`
}

func TestDOCXStructure(t *testing.T) {
	t.Parallel()
	img := pngBytes("chart")
	body := wp(`<w:pStyle w:val="Title"/>`, wr("", "Annual Report")) +
		wp(`<w:pStyle w:val="Heading1"/>`, wr("", "Overview")) +
		wp(`<w:pStyle w:val="2"/>`, wr("", "Details")) +
		wp(`<w:pStyle w:val="MyChapter"/>`, wr("", "Chapter")) +
		wp(`<w:outlineLvl w:val="2"/>`, wr("", "Outline three")) +
		wp("", wr("", "Plain ")+wr("<w:b/>", "bold")+wr("", " and ")+wr("<w:i/>", "italic ")+wr("<w:b/><w:i/>", "both")+
			wr("<w:b w:val=\"0\"/>", " not bold, see ")+`<w:hyperlink r:id="rIdLink">`+wr("", "the site")+`</w:hyperlink>`+wr("", ".")) +
		wp(numPr("1", "0"), wr("", "First bullet")) +
		wp(numPr("1", "1"), wr("", "Nested bullet")) +
		wp(`<w:pStyle w:val="ListBullet"/>`, wr("", "Styled bullet")) +
		wp(numPr("2", "0"), wr("", "Step one")) +
		wp(numPr("2", "1"), wr("", "Sub-step")) +
		wp(numPr("2", "0"), wr("", "Step two")) +
		wp("", "") + // empty paragraphs vanish
		`<w:tbl><w:tr>` + cell("", "Name") + cell("", "Score") + `</w:tr>` +
		`<w:tr>` + cell("", "Ann|A") + cell("", "90") + `</w:tr>` +
		`<w:tr>` + cell(`<w:gridSpan w:val="2"/>`, "Total") + `</w:tr></w:tbl>` +
		wp("", drawing("rIdImg", "Sales chart")) +
		wp("", wr("", "Kept")+`<w:del><w:r><w:delText>Removed</w:delText></w:r></w:del>`+
			`<w:ins>`+wr("", " inserted")+`</w:ins>`+`<w:r><w:rPr><w:vanish/></w:rPr><w:t>hidden</w:t></w:r>`)
	data := docxFile(t, body,
		[]string{"rIdLink", relLink, "https://example.com/docs", "rIdImg", relImage, "media/image1.png",
			"rIdS", relStyles, "styles.xml", "rIdN", relNumbering, "numbering.xml"},
		zipEntry{name: "word/media/image1.png", data: img},
		zipEntry{name: "word/styles.xml", data: []byte(docxStyles)},
		zipEntry{name: "word/numbering.xml", data: []byte(docxNumbering)},
	)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "report.docx", data)
	want := strings.Join([]string{
		"# Annual Report",
		"# Overview",
		"## Details",
		"# Chapter",
		"### Outline three",
		"Plain **bold** and *italic* ***both*** not bold, see [the site](https://example.com/docs).",
		"- First bullet\n    - Nested bullet\n- Styled bullet\n1. Step one\n    1. Sub-step\n2. Step two",
		"| Name | Score |\n| --- | --- |\n| Ann\\|A | 90 |\n| Total | Total |",
		"![Sales chart](media/image1.png)",
		"Kept inserted",
	}, "\n\n")
	wantEqual(t, res.Markdown, want)
	if len(res.Images) != 1 {
		t.Fatalf("images = %d, want 1", len(res.Images))
	}
	im := res.Images[0]
	if im.Name != "media/image1.png" || im.ContentType != "image/png" || !bytes.Equal(im.Data, img) {
		t.Errorf("image = %s %s %q", im.Name, im.ContentType, im.Data)
	}
	if res.Format != "docx" || res.Pages != 0 {
		t.Errorf("format=%q pages=%d", res.Format, res.Pages)
	}
}

func TestDOCXMergedCellsTextBoxesAndControls(t *testing.T) {
	t.Parallel()
	textBox := `<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor><wp:docPr id="2" name="Box"/>` +
		`<a:graphic><a:graphicData><wps:wsp><wps:txbx><w:txbxContent>` + wp("", wr("", "Boxed note")) +
		`</w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>` +
		`<mc:Fallback><w:pict><w:t>Fallback copy</w:t></w:pict></mc:Fallback></mc:AlternateContent></w:r>`
	body := wp("", wr("", "Anchor")+textBox) +
		`<w:sdt><w:sdtContent>` + wp("", wr("", "In a content control")) + `</w:sdtContent></w:sdt>` +
		`<w:tbl>` +
		`<w:tr>` + cell("", "Region") + cell("", "City") + `</w:tr>` +
		`<w:tr>` + cell(`<w:vMerge w:val="restart"/>`, "North") + cell("", "Oslo") + `</w:tr>` +
		`<w:tr>` + cell(`<w:vMerge/>`, "") + cell("", "Bergen") + `</w:tr>` +
		`<w:tr><w:tc>` + wp("", wr("", "Nested")) + `<w:tbl><w:tr>` + cell("", "x") + cell("", "y") + `</w:tr></w:tbl></w:tc>` + cell("", "two\nlines") + `</w:tr>` +
		`</w:tbl>`
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "merged.docx", docxFile(t, body, nil))
	want := strings.Join([]string{
		"Anchor",
		"Boxed note",
		"In a content control",
		"| Region | City |\n| --- | --- |\n| North | Oslo |\n| North | Bergen |\n| Nested x y | two lines |",
	}, "\n\n")
	wantEqual(t, res.Markdown, want)
}

func TestDOCXImageLimits(t *testing.T) {
	t.Parallel()
	body := wp("", drawing("r1", "")) + wp("", drawing("r2", "")) + wp("", drawing("r1", "again")) + wp("", drawing("r3", "big"))
	data := docxFile(t, body,
		[]string{"r1", relImage, "media/a.png", "r2", relImage, "media/b.jpeg", "r3", relImage, "media/c.png"},
		zipEntry{name: "word/media/a.png", data: pngBytes("a")},
		zipEntry{name: "word/media/b.jpeg", data: jpegBytes("b")},
		zipEntry{name: "word/media/c.png", data: append(pngBytes("c"), make([]byte, 4096)...)},
	)
	res := mustParse(t, docparse.New(nil, docparse.Options{MaxImages: 2, MaxImageBytes: 1024}), "pics.docx", data)
	wantEqual(t, res.Markdown, "![](media/a.png)\n\n![](media/b.jpeg)\n\n![again](media/a.png)\n\n[image: media/c.png]")
	if len(res.Images) != 2 || res.Images[1].ContentType != "image/jpeg" {
		t.Fatalf("images = %+v", res.Images)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "media/c.png") {
		t.Errorf("warnings = %v", res.Warnings)
	}
}
