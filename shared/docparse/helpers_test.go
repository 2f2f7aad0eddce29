package docparse_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// parse runs a Parser over an in-memory file.
func parse(t *testing.T, p *docparse.Parser, name string, data []byte) (docparse.Result, error) {
	t.Helper()
	return p.Parse(context.Background(), name, bytes.NewReader(data), int64(len(data)))
}

// mustParse fails the test on error.
func mustParse(t *testing.T, p *docparse.Parser, name string, data []byte) docparse.Result {
	t.Helper()
	res, err := parse(t, p, name, data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return res
}

// wantCode asserts err is coded like sentinel and its message mentions each
// of the given fragments.
func wantCode(t *testing.T, err error, sentinel *failure.Error, fragments ...string) *failure.Error {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error = %v, want code %s", err, sentinel.Code)
	}
	fe, _ := failure.As(err)
	for _, f := range fragments {
		if !strings.Contains(fe.Message, f) {
			t.Errorf("message %q does not mention %q", fe.Message, f)
		}
	}
	return fe
}

func wantContains(t *testing.T, got string, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(got, f) {
			t.Errorf("Markdown does not contain %q:\n%s", f, got)
		}
	}
}

func wantEqual(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("Markdown mismatch\n--- got ---\n%s\n--- want ---\n%s", got, want)
	}
}

// zipEntry is a file for buildZip; entries with raw set are written with
// CreateRaw so tests can forge headers.
type zipEntry struct {
	name   string
	data   []byte
	store  bool
	header *zip.FileHeader // used as-is with CreateRaw when set
}

func buildZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		if e.header != nil {
			fw, err := w.CreateRaw(e.header)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Write(e.data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.store {
			h.Method = zip.Store
		}
		fw, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// files turns name/content pairs into zip entries.
func files(pairs ...string) []zipEntry {
	var out []zipEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, zipEntry{name: pairs[i], data: []byte(pairs[i+1])})
	}
	return out
}

// pngBytes is a PNG signature followed by a marker, enough for sniffing.
func pngBytes(marker string) []byte {
	return append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), marker...)
}

func jpegBytes(marker string) []byte {
	return append([]byte{0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 'J', 'F', 'I', 'F', 0}, marker...)
}

const (
	relDoc       = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
	relImage     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"
	relLink      = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"
	relStyles    = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles"
	relNumbering = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/numbering"
	relSlide     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide"
	relNotes     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide"
	relSheet     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"
	relSST       = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"
	relChart     = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/chartsheet"

	nsDecl = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" ` +
		`xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" ` +
		`xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" ` +
		`xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" ` +
		`xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture" ` +
		`xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" ` +
		`xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" ` +
		`xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"`
	nsSheet = `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" ` +
		`xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
)

// relsXML writes a relationships part from id, type, target triples; a
// target starting with "http" is external.
func relsXML(triples ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`)
	for i := 0; i+2 < len(triples); i += 3 {
		mode := ""
		if strings.HasPrefix(triples[i+2], "http") {
			mode = ` TargetMode="External"`
		}
		b.WriteString(`<Relationship Id="` + triples[i] + `" Type="` + triples[i+1] + `" Target="` + triples[i+2] + `"` + mode + `/>`)
	}
	b.WriteString(`</Relationships>`)
	return b.String()
}

const contentTypes = `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>`

// docxFile builds a .docx whose body is body; docRels are the document's
// relationships (triples) and extra adds parts.
func docxFile(t testing.TB, body string, docRels []string, extra ...zipEntry) []byte {
	t.Helper()
	entries := append(files(
		"[Content_Types].xml", contentTypes,
		"_rels/.rels", relsXML("rId1", relDoc, "word/document.xml"),
		"word/document.xml", `<?xml version="1.0" encoding="UTF-8"?><w:document `+nsDecl+`><w:body>`+body+`<w:sectPr/></w:body></w:document>`,
		"word/_rels/document.xml.rels", relsXML(docRels...),
	), extra...)
	return buildZip(t, entries...)
}

// wp wraps runs in a paragraph.
func wp(pPr, runs string) string {
	if pPr != "" {
		pPr = "<w:pPr>" + pPr + "</w:pPr>"
	}
	return "<w:p>" + pPr + runs + "</w:p>"
}

// wr is a run; props like "<w:b/>".
func wr(props, text string) string {
	if props != "" {
		props = "<w:rPr>" + props + "</w:rPr>"
	}
	return `<w:r>` + props + `<w:t xml:space="preserve">` + text + `</w:t></w:r>`
}

// cfbFile fakes an OLE compound file; with encrypted set its directory names
// the MS-OFFCRYPTO streams. pad puts filler before the directory so it lies
// beyond the 8 KiB head Detect sees.
func cfbFile(encrypted bool, pad int) []byte {
	b := append([]byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}, make([]byte, 504)...)
	b = append(b, make([]byte, pad)...)
	names := []string{"Root Entry", "WordDocument"}
	if encrypted {
		names = []string{"Root Entry", "EncryptionInfo", "EncryptedPackage"}
	}
	for _, n := range names {
		entry := make([]byte, 128)
		u := utf16.Encode([]rune(n))
		for i, c := range u {
			binary.LittleEndian.PutUint16(entry[2*i:], c)
		}
		b = append(b, entry...)
	}
	return b
}

// countingReaderAt counts the reads that overlap [from, to).
type countingReaderAt struct {
	r        *bytes.Reader
	from, to int64
	touched  atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	if off < c.to && off+int64(n) > c.from {
		c.touched.Add(1)
	}
	return n, err
}
