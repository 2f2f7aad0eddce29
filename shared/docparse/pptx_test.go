package docparse_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// sp is a shape; ph is its placeholder element (e.g. `<p:ph type="title"/>`).
func sp(ph string, paragraphs ...string) string {
	return `<p:sp><p:nvSpPr><p:cNvPr id="1" name="s"/><p:cNvSpPr/><p:nvPr>` + ph + `</p:nvPr></p:nvSpPr><p:txBody><a:bodyPr/>` +
		strings.Join(paragraphs, "") + `</p:txBody></p:sp>`
}

// ap is a DrawingML paragraph; pPr is its property element or "".
func ap(pPr string, runs ...string) string {
	return "<a:p>" + pPr + strings.Join(runs, "") + "</a:p>"
}

func ar(attrs, text string) string {
	return `<a:r><a:rPr lang="en-US"` + attrs + `/><a:t>` + text + `</a:t></a:r>`
}

func slideXML(shapes ...string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><p:sld ` + nsDecl + `><p:cSld><p:spTree><p:nvGrpSpPr/><p:grpSpPr/>` +
		strings.Join(shapes, "") + `</p:spTree></p:cSld></p:sld>`
}

func pptxFile(t testing.TB, presRels []string, sldIDs string, extra ...zipEntry) []byte {
	t.Helper()
	return buildZip(t, append(files(
		"[Content_Types].xml", contentTypes,
		"_rels/.rels", relsXML("rId1", relDoc, "ppt/presentation.xml"),
		"ppt/presentation.xml", `<p:presentation `+nsDecl+`><p:sldIdLst>`+sldIDs+`</p:sldIdLst></p:presentation>`,
		"ppt/_rels/presentation.xml.rels", relsXML(presRels...),
	), extra...)...)
}

func TestPPTXSlides(t *testing.T) {
	t.Parallel()
	img := jpegBytes("photo")
	slide1 := slideXML(
		sp(`<p:ph type="title"/>`, ap("", ar("", "Quarterly "), ar(` b="1"`, "Review"))),
		sp(`<p:ph idx="1"/>`,
			ap("", ar("", "Revenue "), ar(` b="1"`, "up")),
			ap(`<a:pPr lvl="1"/>`, ar(` i="1"`, "mostly Europe")),
			ap(`<a:pPr><a:buNone/></a:pPr>`, ar("", "No bullet here")),
			ap("", `<a:r><a:rPr><a:hlinkClick r:id="rLink"/></a:rPr><a:t>details</a:t></a:r>`)),
		sp("", ap("", ar("", "Free text box")), ap(`<a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr>`, ar("", "first")),
			ap(`<a:pPr><a:buAutoNum type="arabicPeriod"/></a:pPr>`, ar("", "second"))),
		sp(`<p:ph type="sldNum" idx="12"/>`, ap("", `<a:fld id="x" type="slidenum"><a:t>1</a:t></a:fld>`)),
		`<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="4" name="Table"/></p:nvGraphicFramePr><a:graphic><a:graphicData><a:tbl>`+
			`<a:tr><a:tc><a:txBody>`+ap("", ar("", "Region"))+`</a:txBody></a:tc><a:tc><a:txBody>`+ap("", ar("", "Sales"))+`</a:txBody></a:tc></a:tr>`+
			`<a:tr><a:tc gridSpan="2"><a:txBody>`+ap("", ar("", "EU"))+`</a:txBody></a:tc><a:tc hMerge="1"><a:txBody>`+ap("")+`</a:txBody></a:tc></a:tr>`+
			`</a:tbl></a:graphicData></a:graphic></p:graphicFrame>`,
		`<p:grpSp><p:nvGrpSpPr/><p:grpSpPr/><p:pic><p:nvPicPr><p:cNvPr id="5" name="Picture" descr="Team photo"/></p:nvPicPr>`+
			`<p:blipFill><a:blip r:embed="rImg"/></p:blipFill></p:pic></p:grpSp>`,
	)
	slide2 := slideXML(sp(`<p:ph type="ctrTitle"/>`, ap("", ar("", "Welcome"))))
	notes := `<p:notes ` + nsDecl + `><p:cSld><p:spTree>` +
		sp(`<p:ph type="sldImg"/>`) + sp(`<p:ph type="body" idx="1"/>`, ap("", ar("", "Say hello")), ap("", ar("", "Then numbers"))) +
		`</p:spTree></p:cSld></p:notes>`
	// Presentation order puts slide2.xml first: the file numbers are not the order.
	data := pptxFile(t,
		[]string{"rA", relSlide, "slides/slide2.xml", "rB", relSlide, "slides/slide1.xml"},
		`<p:sldId id="256" r:id="rA"/><p:sldId id="257" r:id="rB"/>`,
		zipEntry{name: "ppt/slides/slide1.xml", data: []byte(slide1)},
		zipEntry{name: "ppt/slides/slide2.xml", data: []byte(slide2)},
		zipEntry{name: "ppt/slides/_rels/slide1.xml.rels", data: []byte(relsXML(
			"rImg", relImage, "../media/image7.jpeg", "rLink", relLink, "https://example.com/q3",
			"rN", relNotes, "../notesSlides/notesSlide1.xml"))},
		zipEntry{name: "ppt/notesSlides/notesSlide1.xml", data: []byte(notes)},
		zipEntry{name: "ppt/media/image7.jpeg", data: img},
	)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "deck.pptx", data)
	want := strings.Join([]string{
		"## Slide 1",
		"### Welcome",
		"## Slide 2",
		"### Quarterly Review",
		"- Revenue **up**\n    - *mostly Europe*",
		"No bullet here",
		"- [details](https://example.com/q3)",
		"Free text box",
		"1. first\n2. second",
		"| Region | Sales |\n| --- | --- |\n| EU | EU |",
		"![Team photo](media/image7.jpeg)",
		"> Notes: Say hello\n>\n> Then numbers",
	}, "\n\n")
	wantEqual(t, res.Markdown, want)
	if res.Pages != 2 || res.Format != "pptx" {
		t.Errorf("pages=%d format=%q", res.Pages, res.Format)
	}
	if len(res.Images) != 1 || res.Images[0].Name != "media/image7.jpeg" || !bytes.Equal(res.Images[0].Data, img) {
		t.Fatalf("images = %+v", res.Images)
	}
}

func TestPPTXWithoutSlideListUsesFileNumbers(t *testing.T) {
	t.Parallel()
	data := buildZip(t, files(
		"ppt/presentation.xml", `<p:presentation `+nsDecl+`/>`,
		"ppt/slides/slide10.xml", slideXML(sp(`<p:ph type="title"/>`, ap("", ar("", "Ten")))),
		"ppt/slides/slide2.xml", slideXML(sp(`<p:ph type="title"/>`, ap("", ar("", "Two")))),
		"ppt/slides/slide1.xml", slideXML(),
	)...)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "loose.pptx", data)
	wantEqual(t, res.Markdown, "## Slide 1\n\n## Slide 2\n\n### Two\n\n## Slide 3\n\n### Ten")
	if res.Pages != 3 {
		t.Errorf("pages = %d", res.Pages)
	}
}
