package docparse_test

import (
	"archive/zip"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// Failures shared by the three Office Open XML formats.

func TestOfficeEncrypted(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	for _, name := range []string{"secret.docx", "secret.pptx", "secret.xlsx"} {
		// The directory lies beyond Detect's head; Parse scans the whole file.
		_, err := parse(t, p, name, cfbFile(true, 64<<10))
		wantCode(t, err, docparse.ErrEncrypted, name, "password")
	}
}

func TestOfficeLegacyBinaryIsWrongType(t *testing.T) {
	t.Parallel()
	_, err := parse(t, docparse.New(nil, docparse.Options{}), "old.docx", cfbFile(false, 0))
	wantCode(t, err, docparse.ErrWrongType, "old.docx", "legacy binary Office file", "save it as .docx")
}

func TestOfficeEncryptedZipEntry(t *testing.T) {
	t.Parallel()
	doc := docxFile(t, wp("", wr("", "x")), nil)
	zr, err := zip.NewReader(strings.NewReader(string(doc)), int64(len(doc)))
	if err != nil {
		t.Fatal(err)
	}
	var entries []zipEntry
	for _, f := range zr.File {
		rc, _ := f.OpenRaw()
		raw := make([]byte, f.CompressedSize64)
		_, _ = rc.Read(raw)
		h := f.FileHeader
		if f.Name == "word/document.xml" {
			h.Flags |= 0x1 // traditional PKWARE encryption
		}
		entries = append(entries, zipEntry{header: &h, data: raw})
	}
	_, err = parse(t, docparse.New(nil, docparse.Options{}), "locked.docx", buildZip(t, entries...))
	wantCode(t, err, docparse.ErrEncrypted, "locked.docx", "word/document.xml")
}

func TestOfficeCorrupt(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	truncated := docxFile(t, wp("", wr("", "hello")), nil)
	cases := map[string][]byte{
		"garbage.docx":   append([]byte("PK\x03\x04"), strings.Repeat("garbage", 50)...),
		"truncated.pptx": truncated[:len(truncated)/2],
		"badxml.docx": buildZip(t, files(
			"_rels/.rels", relsXML("rId1", relDoc, "word/document.xml"),
			"word/document.xml", `<w:document `+nsDecl+`><w:body><w:p></w:body>`)...),
		"nobody.docx": buildZip(t, files("word/document.xml", `<w:document `+nsDecl+`></w:document>`)...),
	}
	for name, data := range cases {
		_, err := parse(t, p, name, data)
		wantCode(t, err, docparse.ErrCorrupt, name)
	}
}

func TestOfficeWrongContainer(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	workbook := buildZip(t, files(
		"_rels/.rels", relsXML("rId1", relDoc, "xl/workbook.xml"),
		"xl/workbook.xml", `<workbook `+nsSheet+`><sheets/></workbook>`)...)
	_, err := parse(t, p, "really-a-sheet.docx", workbook)
	wantCode(t, err, docparse.ErrWrongType, "an Excel workbook", "rename it to .xlsx")

	_, err = parse(t, p, "plain.pptx", buildZip(t, files("notes.md", "# hi")...))
	wantCode(t, err, docparse.ErrWrongType, "plain ZIP archive", "PowerPoint")
}

func TestOfficeDecompressionBudget(t *testing.T) {
	t.Parallel()
	// 2 MiB of highly compressible text in document.xml against a 1 MiB
	// budget: rejected while streaming, not after inflating everything.
	body := wp("", wr("", strings.Repeat("a", 2<<20)))
	data := docxFile(t, body, nil)
	_, err := parse(t, docparse.New(nil, docparse.Options{MaxArchiveBytes: 1 << 20}), "bomb.docx", data)
	wantCode(t, err, docparse.ErrArchiveRejected, "bomb.docx", "1 MiB")

	// The same document passes under the default 100 MiB.
	if _, err := parse(t, docparse.New(nil, docparse.Options{}), "big.docx", data); err != nil {
		t.Fatalf("default budget: %v", err)
	}
}
