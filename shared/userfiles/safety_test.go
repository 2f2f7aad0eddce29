package userfiles

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(data)
	}
	_ = zw.Close()
	return buf.Bytes()
}

func tgzOf(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(data)
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

func TestCheckUploadRefusesUnsafeArchivesWithTheirCodes(t *testing.T) {
	zeros := bytes.Repeat([]byte{0}, 32<<20)
	for _, c := range []struct {
		name string
		data []byte
		code string
	}{
		{"slip.zip", zipOf(t, map[string][]byte{"../evil.sh": []byte("x")}), "unsafe_archive_entry"},
		{"abs.zip", zipOf(t, map[string][]byte{"/etc/passwd": []byte("x")}), "unsafe_archive_entry"},
		{"win.zip", zipOf(t, map[string][]byte{"..\\..\\evil.bat": []byte("x")}), "unsafe_archive_entry"},
		{"bomb.zip", zipOf(t, map[string][]byte{"z": zeros}), "archive_bomb"},
		{"slip.tar.gz", tgzOf(t, "../../x", []byte("x")), "unsafe_archive_entry"},
		{"bomb.tgz", tgzOf(t, "z", zeros), "archive_bomb"},
		{"broken.zip", []byte("PK\x03\x04 not really"), "corrupt_archive"},
		{"big.txt", bytes.Repeat([]byte("x"), 1025), "file_too_large"},
	} {
		limit := int64(64 << 20)
		if c.name == "big.txt" {
			limit = 1024
		}
		err := CheckUpload(c.name, c.data, limit)
		fe, ok := failure.As(err)
		if !ok || fe.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if err := CheckUpload("ok.zip", zipOf(t, map[string][]byte{"docs/a.md": []byte("# hi")}), 1<<20); err != nil {
		t.Errorf("a safe zip: %v", err)
	}
	if err := CheckUpload("notes.txt", []byte("plain"), 1<<20); err != nil {
		t.Errorf("a text file: %v", err)
	}
}

func TestServeNeverRendersActiveContent(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   string
		ct     string
		inline bool
	}{
		{"page.html", "<script>alert(1)</script>", "text/plain; charset=utf-8", true},
		{"pic.svg", "<svg onload=alert(1)>", "application/octet-stream", false}, // SVG runs script: never inline
		{"fake.png", "<html><script>x</script>", "application/octet-stream", false},
		{"real.bin", "\x89PNG\r\n\x1a\nxxxx", "image/png", true},
		{"doc.pdf", "%PDF-1.4", "application/pdf", true},
		{"blob.exe", "MZ\x00\x01", "application/octet-stream", false},
		{"notes.md", "# hi", "text/markdown; charset=utf-8", true},
	} {
		sv := serve(c.name, []byte(c.data))
		if sv.ContentType != c.ct || sv.Inline != c.inline {
			t.Errorf("%s: %s inline=%v, want %s inline=%v", c.name, sv.ContentType, sv.Inline, c.ct, c.inline)
		}
	}
}

func TestFuzzyRanksNameMatchesFirst(t *testing.T) {
	exact := fuzzy("/a/report.md", "report.md", "report.md")
	prefix := fuzzy("/a/report.md", "report.md", "rep")
	inPath := fuzzy("/report/x.md", "x.md", "report")
	subseq := fuzzy("/a/r_e_p.md", "r_e_p.md", "rep")
	if !(exact > prefix && prefix > inPath && subseq > 0) || fuzzy("/a/b.md", "b.md", "zzz") != 0 {
		t.Errorf("scores: exact %d prefix %d path %d subsequence %d", exact, prefix, inPath, subseq)
	}
}
