// Package docparsetest builds small documents in memory for tests: Office
// Open XML files (DOCX with headings, paragraphs and tables; PPTX slides;
// XLSX sheets), PDFs with a real text layer (single-column pages and a
// two-column page whose columns share baselines), a password-protected PDF,
// a damaged PDF, a Markdown bundle laid out as MinerU exports it, hostile
// archives (a path-escaping entry, a zip bomb, too many entries) and a tiny
// PNG.
//
// The builders write the formats the way producers do, not the way
// shared/docparse happens to read them; docparsetest_test.go checks that
// docparse (and its PDF extractor, shared/docparse/pdf) reads each one to the
// expected Markdown, so tests elsewhere can rely on the text they put in.
// Builders return the file's bytes; they panic only on failures that cannot
// happen when writing to memory.
//
// Imported by: tests of any package (shared/docparse, functions, tests/e2e).
// May import: the standard library only. It never imports shared/docparse, so
// that the tests of shared/docparse may use this package.
package docparsetest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/zlib"
	"crypto/md5"
	"crypto/rc4"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"sort"
	"strconv"
	"strings"
)

// --- ZIP ---

// ZipEntry is a file of an archive built by Zip.
type ZipEntry struct {
	Name string
	Data []byte
}

// Zip writes entries, deflated, in the given order. Names are written as
// given (even "../x.md"): archive/zip does not check them on writing.
func Zip(entries ...ZipEntry) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		fw, err := w.CreateHeader(&zip.FileHeader{Name: e.Name, Method: zip.Deflate})
		must(err)
		_, err = fw.Write(e.Data)
		must(err)
	}
	must(w.Close())
	return buf.Bytes()
}

// MinerUBundle is a Markdown bundle as MinerU exports it: full.md, the
// images it links under images/, and the layout and content-list JSON that
// come with them. images maps a base name ("chart.png") to its bytes; the
// Markdown should link them as images/<name>.
func MinerUBundle(markdown string, images map[string][]byte) []byte {
	entries := []ZipEntry{{Name: "full.md", Data: []byte(markdown)}}
	names := make([]string, 0, len(images))
	for n := range images {
		names = append(names, n)
	}
	sort.Strings(names)
	var list []string
	for _, n := range names {
		entries = append(entries, ZipEntry{Name: "images/" + n, Data: images[n]})
		list = append(list, `{"type":"image","img_path":"images/`+n+`","page_idx":0}`)
	}
	entries = append(entries,
		ZipEntry{Name: "layout.json", Data: []byte(`{"pdf_info":[],"_backend":"pipeline","_version_name":"2.1.0"}`)},
		ZipEntry{Name: "content_list.json", Data: []byte("[" + strings.Join(list, ",") + "]")},
	)
	return Zip(entries...)
}

// ZipPathEscape is a bundle whose second entry, "../x.md", would be written
// outside the directory it is unpacked into (a "zip slip").
func ZipPathEscape() []byte {
	return Zip(
		ZipEntry{Name: "index.md", Data: []byte("# Bundle\n\nAn innocent-looking bundle.\n")},
		ZipEntry{Name: "../x.md", Data: []byte("# Escaped\n\nThis entry climbs out of the archive.\n")},
	)
}

// ZipBomb is a bundle whose only Markdown file, full.md, inflates from a few
// KiB to size bytes of spaces: a compression ratio near 1000:1. It is
// written in pieces, so size may be large without holding it in memory.
func ZipBomb(size int64) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	w.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestCompression)
	})
	fw, err := w.CreateHeader(&zip.FileHeader{Name: "full.md", Method: zip.Deflate})
	must(err)
	_, err = fw.Write([]byte("# Bomb\n\n"))
	must(err)
	piece := bytes.Repeat([]byte(" "), 64<<10)
	for left := size - 8; left > 0; left -= int64(len(piece)) {
		_, err = fw.Write(piece[:min(int64(len(piece)), left)])
		must(err)
	}
	must(w.Close())
	return buf.Bytes()
}

// ZipManyEntries is a bundle of n entries: index.md and n-1 small notes.
func ZipManyEntries(n int) []byte {
	entries := []ZipEntry{{Name: "index.md", Data: []byte("# Index\n\nMany small notes follow.\n")}}
	for i := 1; i < n; i++ {
		entries = append(entries, ZipEntry{Name: fmt.Sprintf("notes/%05d.txt", i), Data: []byte("note " + strconv.Itoa(i))})
	}
	return Zip(entries...)
}

// --- images ---

// PNG is a valid 4×4 PNG (a diagonal on white), 70-odd bytes.
func PNG() []byte {
	img := image.NewGray(image.Rect(0, 0, 4, 4))
	for y := range 4 {
		for x := range 4 {
			img.SetGray(x, y, color.Gray{Y: 255})
		}
		img.SetGray(y, y, color.Gray{Y: 0})
	}
	var buf bytes.Buffer
	must(png.Encode(&buf, img))
	return buf.Bytes()
}

// --- Office Open XML ---

const (
	relDoc    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	relStyles = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
	relSlide  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide"
	relSheet  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"

	nsW   = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	nsP   = `xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"`
	nsS   = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	xmlPI = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`
)

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	must(xml.EscapeText(&b, []byte(s)))
	return b.String()
}

// rels writes a relationships part from (id, type, target) triples.
func rels(triples ...string) string {
	var b strings.Builder
	b.WriteString(xmlPI + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`)
	for i := 0; i+2 < len(triples); i += 3 {
		fmt.Fprintf(&b, `<Relationship Id="%s" Type="%s" Target="%s"/>`, triples[i], triples[i+1], triples[i+2])
	}
	b.WriteString(`</Relationships>`)
	return b.String()
}

// contentTypes declares the package's parts (overrides are part name,
// content type pairs).
func contentTypes(overrides ...string) string {
	var b strings.Builder
	b.WriteString(xmlPI + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
		`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
		`<Default Extension="xml" ContentType="application/xml"/>`)
	for i := 0; i+1 < len(overrides); i += 2 {
		fmt.Fprintf(&b, `<Override PartName="%s" ContentType="%s"/>`, overrides[i], overrides[i+1])
	}
	b.WriteString(`</Types>`)
	return b.String()
}

// Block is a part of a DOCX body: a heading, a paragraph or a table.
type Block struct {
	heading int
	text    string
	table   [][]string
}

// Heading is a heading paragraph of level 1–6 (style "Heading<level>").
func Heading(level int, text string) Block { return Block{heading: min(max(level, 1), 6), text: text} }

// Paragraph is a body paragraph.
func Paragraph(text string) Block { return Block{text: text} }

// Table is a table whose first row is the header.
func Table(rows ...[]string) Block { return Block{table: rows} }

func wpara(style, text string) string {
	pPr := ""
	if style != "" {
		pPr = `<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`
	}
	return `<w:p>` + pPr + `<w:r><w:t xml:space="preserve">` + esc(text) + `</w:t></w:r></w:p>`
}

// DOCX writes a Word document with the blocks, headings styled with the
// built-in "heading N" styles (declared in word/styles.xml).
func DOCX(blocks ...Block) []byte {
	var body strings.Builder
	for _, bl := range blocks {
		switch {
		case bl.table != nil:
			body.WriteString(`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/></w:tblPr>`)
			for _, row := range bl.table {
				body.WriteString(`<w:tr>`)
				for _, c := range row {
					body.WriteString(`<w:tc>` + wpara("", c) + `</w:tc>`)
				}
				body.WriteString(`</w:tr>`)
			}
			body.WriteString(`</w:tbl>`)
		case bl.heading > 0:
			body.WriteString(wpara("Heading"+strconv.Itoa(bl.heading), bl.text))
		default:
			body.WriteString(wpara("", bl.text))
		}
	}
	var styles strings.Builder
	styles.WriteString(xmlPI + `<w:styles ` + nsW + `><w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>`)
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&styles, `<w:style w:type="paragraph" w:styleId="Heading%d"><w:name w:val="heading %d"/><w:basedOn w:val="Normal"/><w:pPr><w:outlineLvl w:val="%d"/></w:pPr></w:style>`, i, i, i-1)
	}
	styles.WriteString(`</w:styles>`)
	return Zip(
		ZipEntry{"[Content_Types].xml", []byte(contentTypes(
			"/word/document.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
			"/word/styles.xml", "application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"))},
		ZipEntry{"_rels/.rels", []byte(rels("rId1", relDoc, "word/document.xml"))},
		ZipEntry{"word/document.xml", []byte(xmlPI + `<w:document ` + nsW + `><w:body>` + body.String() +
			`<w:sectPr><w:pgSz w:w="11906" w:h="16838"/></w:sectPr></w:body></w:document>`)},
		ZipEntry{"word/_rels/document.xml.rels", []byte(rels("rId1", relStyles, "styles.xml"))},
		ZipEntry{"word/styles.xml", []byte(styles.String())},
	)
}

// Slide is a PPTX slide: a title placeholder and a body placeholder with
// one paragraph per line.
type Slide struct {
	Title string
	Lines []string
}

func pptShape(id int, ph string, paragraphs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<p:sp><p:nvSpPr><p:cNvPr id="%d" name="Shape %d"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr>%s</p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>`, id, id, ph)
	for _, p := range paragraphs {
		b.WriteString(`<a:p><a:r><a:rPr lang="en-US" dirty="0"/><a:t>` + esc(p) + `</a:t></a:r></a:p>`)
	}
	b.WriteString(`</p:txBody></p:sp>`)
	return b.String()
}

// PPTX writes a presentation with the slides in order.
func PPTX(slides ...Slide) []byte {
	overrides := []string{"/ppt/presentation.xml", "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"}
	var ids strings.Builder
	var presRels []string
	var parts []ZipEntry
	for i, s := range slides {
		n := i + 1
		fmt.Fprintf(&ids, `<p:sldId id="%d" r:id="rId%d"/>`, 255+n, n)
		presRels = append(presRels, "rId"+strconv.Itoa(n), relSlide, "slides/slide"+strconv.Itoa(n)+".xml")
		overrides = append(overrides, "/ppt/slides/slide"+strconv.Itoa(n)+".xml", "application/vnd.openxmlformats-officedocument.presentationml.slide+xml")
		xmlSlide := xmlPI + `<p:sld ` + nsP + `><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>` +
			pptShape(2, `<p:ph type="title"/>`, []string{s.Title}) + pptShape(3, `<p:ph idx="1"/>`, s.Lines) +
			`</p:spTree></p:cSld></p:sld>`
		parts = append(parts, ZipEntry{"ppt/slides/slide" + strconv.Itoa(n) + ".xml", []byte(xmlSlide)})
	}
	return Zip(append([]ZipEntry{
		{"[Content_Types].xml", []byte(contentTypes(overrides...))},
		{"_rels/.rels", []byte(rels("rId1", relDoc, "ppt/presentation.xml"))},
		{"ppt/presentation.xml", []byte(xmlPI + `<p:presentation ` + nsP + `><p:sldIdLst>` + ids.String() +
			`</p:sldIdLst><p:sldSz cx="12192000" cy="6858000"/></p:presentation>`)},
		{"ppt/_rels/presentation.xml.rels", []byte(rels(presRels...))},
	}, parts...)...)
}

// Sheet is an XLSX worksheet; its first row is the header. Cells are inline
// strings.
type Sheet struct {
	Name string
	Rows [][]string
}

// cellRef names column c (0-based) of row r (1-based): A1, B1, …, AA1.
func cellRef(c, r int) string {
	col := ""
	for c++; c > 0; c = (c - 1) / 26 {
		col = string(rune('A'+(c-1)%26)) + col
	}
	return col + strconv.Itoa(r)
}

// XLSX writes a workbook with the sheets in order.
func XLSX(sheets ...Sheet) []byte {
	overrides := []string{"/xl/workbook.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"}
	var list strings.Builder
	var wbRels []string
	var parts []ZipEntry
	for i, s := range sheets {
		n := strconv.Itoa(i + 1)
		fmt.Fprintf(&list, `<sheet name="%s" sheetId="%s" r:id="rId%s"/>`, esc(s.Name), n, n)
		wbRels = append(wbRels, "rId"+n, relSheet, "worksheets/sheet"+n+".xml")
		overrides = append(overrides, "/xl/worksheets/sheet"+n+".xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml")
		var rows strings.Builder
		for r, row := range s.Rows {
			fmt.Fprintf(&rows, `<row r="%d">`, r+1)
			for c, v := range row {
				fmt.Fprintf(&rows, `<c r="%s" t="inlineStr"><is><t>%s</t></is></c>`, cellRef(c, r+1), esc(v))
			}
			rows.WriteString(`</row>`)
		}
		parts = append(parts, ZipEntry{"xl/worksheets/sheet" + n + ".xml",
			[]byte(xmlPI + `<worksheet ` + nsS + `><sheetData>` + rows.String() + `</sheetData></worksheet>`)})
	}
	return Zip(append([]ZipEntry{
		{"[Content_Types].xml", []byte(contentTypes(overrides...))},
		{"_rels/.rels", []byte(rels("rId1", relDoc, "xl/workbook.xml"))},
		{"xl/workbook.xml", []byte(xmlPI + `<workbook ` + nsS + `><workbookPr/><sheets>` + list.String() + `</sheets></workbook>`)},
		{"xl/_rels/workbook.xml.rels", []byte(rels(wbRels...))},
	}, parts...)...)
}

// --- PDF ---

// Run is a line of text drawn at (X, Y) (PDF points, origin bottom left) in
// Helvetica of the given Size. Text is Latin-1.
type Run struct {
	X, Y, Size float64
	Text       string
}

// Page is a US Letter page (612×792 pt) of text runs, written to the content
// stream in the given order.
type Page struct {
	Runs []Run
}

// Lines lays out lines top-down from (x, top), pitch points apart.
func Lines(x, top, pitch, size float64, lines ...string) []Run {
	rs := make([]Run, 0, len(lines))
	for i, l := range lines {
		rs = append(rs, Run{X: x, Y: top - float64(i)*pitch, Size: size, Text: l})
	}
	return rs
}

// TextPage is a single-column page: 11 pt lines from the top-left margin.
// An empty string leaves a blank line (a paragraph break).
func TextPage(lines ...string) Page {
	var runs []Run
	for i, l := range lines {
		if l != "" {
			runs = append(runs, Run{X: 72, Y: 720 - float64(i)*14, Size: 11, Text: l})
		}
	}
	return Page{Runs: runs}
}

// TwoColumnPage is a page with a title centred across the page above two
// columns of 10 pt lines (left at x=72, right at x=300) that share their
// baselines and are written to the content stream row by row, left line
// then right line, as some producers do: an extractor that reads along the
// baselines mixes the columns. Lines should be at most ~40 characters so
// that the columns do not touch; columns of 8 lines or more are recognised
// reliably.
func TwoColumnPage(title string, left, right []string) Page {
	const titleSize = 16
	// Helvetica's average advance is about half the size: centre on 306.
	runs := []Run{{X: max(306-float64(len(title))*titleSize*0.25, 72), Y: 740, Size: titleSize, Text: title}}
	l, r := Lines(72, 700, 12, 10, left...), Lines(300, 700, 12, 10, right...)
	for i := range max(len(l), len(r)) {
		if i < len(l) {
			runs = append(runs, l[i])
		}
		if i < len(r) {
			runs = append(runs, r[i])
		}
	}
	return Page{Runs: runs}
}

// PDF writes a PDF 1.4 file with the pages, content streams Flate-compressed.
func PDF(pages ...Page) []byte {
	return buildPDF(pages, "")
}

// EncryptedPDF writes the pages encrypted with the standard security handler
// (revision 3, 128-bit RC4) under a non-empty user password: no reader can
// extract its text without the password.
func EncryptedPDF(userPassword string, pages ...Page) []byte {
	if userPassword == "" {
		panic("docparsetest: EncryptedPDF needs a user password (an empty one opens the file)")
	}
	return buildPDF(pages, userPassword)
}

// CorruptPDF is a PDF cut off in the middle of its objects: it starts like
// a PDF (%PDF-1.4) but has no cross-reference table, trailer or %%EOF.
func CorruptPDF() []byte {
	whole := PDF(TextPage("This report was cut off in transfer.", "Nothing after the first objects arrived."))
	return whole[:len(whole)/2]
}

// winAnsi encodes text for the Helvetica font (WinAnsiEncoding = Latin-1
// for letters); other characters become '?'.
func winAnsi(s string) string {
	var b strings.Builder
	b.WriteByte('(')
	for _, r := range s {
		switch {
		case r == '(' || r == ')' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || (r >= 0x7f && r < 0x100):
			fmt.Fprintf(&b, "\\%03o", r)
		case r < 0x7f:
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte(')')
	return b.String()
}

func pageContent(p Page) []byte {
	var b bytes.Buffer
	for _, r := range p.Runs {
		fmt.Fprintf(&b, "BT /F1 %g Tf 1 0 0 1 %g %g Tm %s Tj ET\n", r.Size, r.X, r.Y, winAnsi(r.Text))
	}
	return b.Bytes()
}

// pdfPadding pads passwords (PDF 32000-1, 7.6.3.3).
const pdfPadding = "\x28\xBF\x4E\x5E\x4E\x75\x8A\x41\x64\x00\x4E\x56\xFF\xFA\x01\x08\x2E\x2E\x00\xB6\xD0\x68\x3E\x80\x2F\x0C\xA9\xFE\x64\x53\x69\x7A"

func padPassword(pw string) []byte { return []byte((pw + pdfPadding)[:32]) }

func rc4Crypt(key, data []byte) []byte {
	c, err := rc4.NewCipher(key)
	must(err)
	out := make([]byte, len(data))
	c.XORKeyStream(out, data)
	return out
}

func xorKey(k []byte, x byte) []byte {
	out := make([]byte, len(k))
	for i := range k {
		out[i] = k[i] ^ x
	}
	return out
}

// securityR3 computes the O and U entries and the file key of the standard
// security handler, revision 3 with a 128-bit key (PDF 32000-1 Algorithms
// 2, 3 and 5), for the owner password "owner".
func securityR3(user string, id []byte, perms int32) (o, u, key []byte) {
	ownerKey := md5.Sum(padPassword("owner"))
	for range 50 {
		ownerKey = md5.Sum(ownerKey[:])
	}
	o = rc4Crypt(ownerKey[:], padPassword(user))
	for i := 1; i <= 19; i++ {
		o = rc4Crypt(xorKey(ownerKey[:], byte(i)), o)
	}
	h := md5.New()
	h.Write(padPassword(user))
	h.Write(o)
	must(binary.Write(h, binary.LittleEndian, perms))
	h.Write(id)
	key = h.Sum(nil)
	for range 50 {
		s := md5.Sum(key)
		key = s[:]
	}
	uh := md5.Sum(append([]byte(pdfPadding), id...))
	u = rc4Crypt(key, uh[:])
	for i := 1; i <= 19; i++ {
		u = rc4Crypt(xorKey(key, byte(i)), u)
	}
	return o, append(u, make([]byte, 16)...), key
}

// objectKey is the RC4 key of object n, generation 0 (Algorithm 1).
func objectKey(fileKey []byte, n int) []byte {
	h := md5.New()
	h.Write(fileKey)
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), 0, 0})
	return h.Sum(nil)[:min(len(fileKey)+5, 16)]
}

func buildPDF(pages []Page, userPassword string) []byte {
	id := []byte("docparsetest-id!")
	const perms int32 = -44
	var fileKey []byte
	var encrypt string
	if userPassword != "" {
		var o, u []byte
		o, u, fileKey = securityR3(userPassword, id, perms)
		encrypt = fmt.Sprintf("<< /Filter /Standard /V 2 /R 3 /Length 128 /O <%X> /U <%X> /P %d >>", o, u, perms)
	}
	var objs []string // objs[i] is object i+1
	add := func(body string) int { objs = append(objs, body); return len(objs) }
	stream := func(data []byte) int {
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		_, err := zw.Write(data)
		must(err)
		must(zw.Close())
		data = z.Bytes()
		n := len(objs) + 1
		if fileKey != nil {
			data = rc4Crypt(objectKey(fileKey, n), data)
		}
		return add(fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", len(data), data))
	}
	catalog := add("")
	tree := add("")
	font := add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	res := add(fmt.Sprintf("<< /Font << /F1 %d 0 R >> /ProcSet [/PDF /Text] >>", font))
	var kids []string
	for _, p := range pages {
		c := stream(pageContent(p))
		pg := add(fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources %d 0 R /Contents %d 0 R >>", tree, res, c))
		kids = append(kids, fmt.Sprintf("%d 0 R", pg))
	}
	objs[catalog-1] = fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", tree)
	objs[tree-1] = fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(kids))
	trailer := fmt.Sprintf("/Root %d 0 R /ID [<%X> <%X>]", catalog, id, id)
	if encrypt != "" {
		trailer += fmt.Sprintf(" /Encrypt %d 0 R", add(encrypt))
	}

	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, trailer, xref)
	return out.Bytes()
}

func must(err error) {
	if err != nil {
		panic("docparsetest: " + err.Error())
	}
}
