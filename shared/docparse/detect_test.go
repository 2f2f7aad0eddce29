package docparse_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func TestSupportedExtensions(t *testing.T) {
	t.Parallel()
	got := docparse.SupportedExtensions()
	want := []string{".bmp", ".csv", ".docx", ".htm", ".html", ".jpeg", ".jpg", ".json", ".md", ".pdf", ".png", ".pptx", ".tif", ".tiff", ".txt", ".xlsx", ".zip"}
	if !slices.Equal(got, want) {
		t.Fatalf("SupportedExtensions() = %v, want %v", got, want)
	}
}

func TestDetectAcceptsMatchingContent(t *testing.T) {
	t.Parallel()
	zipHead := buildZip(t, files("a.md", "x")...)
	cases := []struct {
		name string
		head []byte
		want string
	}{
		{"Report.PDF", []byte("%PDF-1.7\n%âãÏÓ"), ".pdf"},
		{"junk-before-header.pdf", append(make([]byte, 100), "%PDF-1.4"...), ".pdf"},
		{"a.docx", zipHead, ".docx"},
		{"a.pptx", zipHead, ".pptx"},
		{"a.xlsx", zipHead, ".xlsx"},
		{"bundle.zip", zipHead, ".zip"},
		{"empty.zip", []byte("PK\x05\x06" + string(make([]byte, 18))), ".zip"},
		{"scan.png", pngBytes(""), ".png"},
		{"photo.jpg", jpegBytes(""), ".jpg"},
		{"screenshot.jpg", pngBytes(""), ".jpg"}, // a PNG named .jpg is still an image
		{"fax.tif", []byte("II*\x00\x08\x00\x00\x00"), ".tif"},
		{"notes.txt", []byte("hello\r\nworld"), ".txt"},
		{"gbk.txt", []byte{0xC4, 0xE3, 0xBA, 0xC3}, ".txt"},
		{"utf16.csv", []byte{0xFF, 0xFE, 'a', 0, ',', 0}, ".csv"},
		{"data.json", []byte(`{"a":1}`), ".json"},
		{"page.HTM", []byte("<html>"), ".htm"},
		{"readme.md", []byte("# Title"), ".md"},
		{"BMW.txt", []byte("BMW cars are fast, but this is text"), ".txt"},
	}
	for _, c := range cases {
		got, err := docparse.Detect(c.name, c.head)
		if err != nil || got != c.want {
			t.Errorf("Detect(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestDetectRejectsWrongExtension(t *testing.T) {
	t.Parallel()
	zipHead := buildZip(t, files("a.md", "x")...)
	cases := []struct {
		name     string
		head     []byte
		mentions string
	}{
		{"report.docx", []byte("%PDF-1.7"), "a PDF document"},
		{"report.pdf", zipHead, "ZIP archive"},
		{"report.pdf", []byte("just some text"), "text, not a PDF"},
		{"slides.pptx", []byte("hello"), "text, not an Office Open XML"},
		{"photo.png", []byte("%PDF-1.4"), "a PDF document"},
		{"photo.jpg", []byte("<html>"), "text"},
		{"notes.txt", pngBytes(""), "a PNG image"},
		{"data.csv", zipHead, "ZIP archive"},
		{"data.json", []byte("%PDF-1.3"), "PDF"},
		{"binary.md", []byte{'a', 0, 'b', 1, 2}, "binary data"},
		{"bundle.zip", []byte("Rar!\x1a\x07\x00"), "RAR archive"},
		{"legacy.docx", cfbFile(false, 0), "legacy binary Office file"},
	}
	for _, c := range cases {
		_, err := docparse.Detect(c.name, c.head)
		if !errors.Is(err, docparse.ErrWrongType) {
			t.Errorf("Detect(%q) error = %v, want file_type_mismatch", c.name, err)
			continue
		}
		wantCode(t, err, docparse.ErrWrongType, c.name, c.mentions)
	}
}

func TestDetectUnsupportedListsTypes(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"old.doc", "sheet.xls", "archive.rar", "noext", "script.py"} {
		_, err := docparse.Detect(name, []byte("x"))
		fe := wantCode(t, err, docparse.ErrUnsupported, name, ".docx")
		if got, _ := fe.Details["supported"].([]string); !slices.Equal(got, docparse.SupportedExtensions()) {
			t.Errorf("%s: Details[supported] = %v", name, fe.Details["supported"])
		}
	}
}

func TestDetectEmptyHead(t *testing.T) {
	t.Parallel()
	_, err := docparse.Detect("a.txt", nil)
	wantCode(t, err, docparse.ErrEmpty, "a.txt")
}

func TestDetectEncryptedOffice(t *testing.T) {
	t.Parallel()
	_, err := docparse.Detect("secret.xlsx", cfbFile(true, 0))
	wantCode(t, err, docparse.ErrEncrypted, "secret.xlsx", "password")
}

func TestSentinelsKeepTheirKind(t *testing.T) {
	t.Parallel()
	if docparse.ErrUnsupported.Kind != failure.KindUnsupportedMedia {
		t.Errorf("unsupported_file_type kind = %v, want 415", docparse.ErrUnsupported.Kind)
	}
	if docparse.ErrTooLarge.Kind != failure.KindTooLarge {
		t.Errorf("file_too_large kind = %v", docparse.ErrTooLarge.Kind)
	}
	if docparse.ErrOCRFailed.Kind != failure.KindUnavailable {
		t.Errorf("ocr_failed kind = %v", docparse.ErrOCRFailed.Kind)
	}
	codes := map[string]bool{}
	for _, e := range []*failure.Error{docparse.ErrUnsupported, docparse.ErrWrongType, docparse.ErrEmpty, docparse.ErrCorrupt,
		docparse.ErrEncrypted, docparse.ErrTooLarge, docparse.ErrArchiveRejected, docparse.ErrOCRNotConfigured, docparse.ErrOCRFailed} {
		if codes[e.Code] {
			t.Errorf("duplicate code %s", e.Code)
		}
		codes[e.Code] = true
	}
}
