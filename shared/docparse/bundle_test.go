package docparse_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestBundleMinerUExport(t *testing.T) {
	t.Parallel()
	a, b := jpegBytes("a"), pngBytes("b")
	md := "# Paper\r\n\r\n![Figure 1](images/a.jpg)\r\n\r\nText <img src=\"images/b.png\" width=\"40\"> and ![remote](https://example.com/x.png).\r\n"
	data := buildZip(t,
		zipEntry{name: "paper/", data: nil},
		zipEntry{name: "paper/full.md", data: []byte(md)},
		zipEntry{name: "paper/paper_layout.md", data: []byte("# layout")},
		zipEntry{name: "paper/images/a.jpg", data: a},
		zipEntry{name: "paper/images/b.png", data: b, store: true},
		zipEntry{name: "paper/images/unused.png", data: pngBytes("unused")},
		zipEntry{name: "__MACOSX/paper/._full.md", data: []byte{0, 5, 22, 7}},
	)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "paper.zip", data)
	wantEqual(t, res.Markdown, "# Paper\n\n![Figure 1](paper/images/a.jpg)\n\nText <img src=\"paper/images/b.png\" width=\"40\"> and ![remote](https://example.com/x.png).\n")
	if len(res.Images) != 2 {
		t.Fatalf("images = %d, want the two referenced ones", len(res.Images))
	}
	if res.Images[0].Name != "paper/images/a.jpg" || res.Images[0].ContentType != "image/jpeg" || !bytes.Equal(res.Images[0].Data, a) {
		t.Errorf("image 0 = %s %s", res.Images[0].Name, res.Images[0].ContentType)
	}
	if res.Images[1].Name != "paper/images/b.png" || !bytes.Equal(res.Images[1].Data, b) {
		t.Errorf("image 1 = %s", res.Images[1].Name)
	}
	if res.Format != "zip" {
		t.Errorf("Format = %q", res.Format)
	}
}

func TestBundleLinkResolution(t *testing.T) {
	t.Parallel()
	md := "![up](../shared/logo.png) ![root](/assets/c.png) ![by name](somewhere/else/d.png) " +
		"![spaced](<my pics/e f.png>) ![missing](nope.png) ![query](../shared/logo.png?v=2)"
	data := buildZip(t, files(
		"docs/README.md", "# not me",
		"docs/index.md", md,
		"docs/guide/deeper.md", "# deeper",
		"shared/logo.png", "\x89PNG\r\n\x1a\nlogo",
		"assets/c.png", "\x89PNG\r\n\x1a\nc",
		"assets/d.png", "\x89PNG\r\n\x1a\nd",
		"docs/my pics/e f.png", "\x89PNG\r\n\x1a\ne",
	)...)
	res := mustParse(t, docparse.New(nil, docparse.Options{}), "site.zip", data)
	wantEqual(t, res.Markdown, "![up](shared/logo.png) ![root](assets/c.png) ![by name](assets/d.png) "+
		"![spaced](<docs/my pics/e f.png>) ![missing](nope.png) ![query](shared/logo.png)")
	if len(res.Images) != 4 {
		t.Errorf("images = %d, want 4 (logo once)", len(res.Images))
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "nope.png") {
		t.Errorf("warnings = %v", res.Warnings)
	}
}

func TestBundleNeedsOneMainMarkdown(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	_, err := parse(t, p, "two.zip", buildZip(t, files("a.md", "a", "b.md", "b", "sub/index.md", "i")...))
	wantCode(t, err, docparse.ErrArchiveRejected, "two.zip", "a.md, b.md", "index.md or README.md")

	_, err = parse(t, p, "pics.zip", buildZip(t, files("a.png", "\x89PNG\r\n\x1a\n", "notes.txt", "x")...))
	wantCode(t, err, docparse.ErrArchiveRejected, "pics.zip", "no Markdown")

	_, err = parse(t, p, "report.zip", docxFile(t, wp("", wr("", "x")), nil))
	wantCode(t, err, docparse.ErrWrongType, "Word document", "rename it to .docx")

	res := mustParse(t, p, "readme.zip", buildZip(t, files("README.md", "# readme", "CHANGES.md", "# changes")...))
	wantEqual(t, res.Markdown, "# readme")
}

func TestBundleRejectsUnsafePaths(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	for _, name := range []string{"../evil.md", "docs/../../evil.md", "/etc/passwd.md", "C:/temp/x.md", `dir\x.md`, "c:evil.md"} {
		data := buildZip(t, files("index.md", "# ok", name, "x")...)
		_, err := parse(t, p, "bad.zip", data)
		fe := wantCode(t, err, docparse.ErrArchiveRejected, "bad.zip", strconv.Quote(name))
		if fe.Details["limit"] != "unsafe_path" {
			t.Errorf("%s: details = %v", name, fe.Details)
		}
	}

	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "link.md"}
	h.SetMode(fs.ModeSymlink | 0o777)
	fw, _ := w.CreateHeader(h)
	_, _ = fw.Write([]byte("/etc/passwd"))
	_ = w.Close()
	_, err := parse(t, p, "symlink.zip", buf.Bytes())
	wantCode(t, err, docparse.ErrArchiveRejected, "symbolic link")
}

func TestBundleLimits(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range 6 {
		many = append(many, "f"+string(rune('a'+i))+".md", "x")
	}
	_, err := parse(t, docparse.New(nil, docparse.Options{MaxArchiveEntries: 5}), "many.zip", buildZip(t, files(many...)...))
	fe := wantCode(t, err, docparse.ErrArchiveRejected, "6 entries", "limit is 5")
	if fe.Details["limit"] != "max_entries" {
		t.Errorf("details = %v", fe.Details)
	}

	_, err = parse(t, docparse.New(nil, docparse.Options{}), "nested.zip", buildZip(t,
		zipEntry{name: "index.md", data: []byte("# hi")},
		zipEntry{name: "inner/more.ZIP", data: buildZip(t, files("a.md", "a")...)}))
	wantCode(t, err, docparse.ErrArchiveRejected, "nested ZIP", "inner/more.ZIP")

	// Plain text that compresses less than 100:1 but adds up past the limit.
	var text strings.Builder
	for i := range 20000 {
		text.WriteString(strings.Repeat(string(rune('a'+i%26)), 1+i%7) + " ")
	}
	big := buildZip(t, files("index.md", text.String())...)
	_, err = parse(t, docparse.New(nil, docparse.Options{MaxArchiveBytes: 32 << 10}), "big.zip", big)
	fe = wantCode(t, err, docparse.ErrArchiveRejected, "big.zip", "32 KiB")
	if fe.Details["limit"] != "max_uncompressed_bytes" {
		t.Errorf("details = %v", fe.Details)
	}
}

func deflate(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	_, _ = fw.Write(data)
	_ = fw.Close()
	return buf.Bytes()
}

func TestBundleZipBombs(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})

	// A real high-ratio entry: 8 MiB of zeros deflate to a few KiB. It is
	// refused from the central directory: no read touches its data.
	zeros := make([]byte, 8<<20)
	// Stored fillers keep the bomb's bytes away from the head Detect reads and
	// from the tail where the central directory is searched.
	filler := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 4<<10)
	bomb := buildZip(t,
		zipEntry{name: "index.md", data: []byte("# hi")},
		zipEntry{name: "images/filler.png", data: filler, store: true},
		zipEntry{name: "images/zero.png", data: zeros},
		zipEntry{name: "images/filler2.png", data: filler, store: true})
	zr, err := zip.NewReader(bytes.NewReader(bomb), int64(len(bomb)))
	if err != nil {
		t.Fatal(err)
	}
	entry := zr.File[2]
	start, _ := entry.DataOffset()
	cr := &countingReaderAt{r: bytes.NewReader(bomb), from: start, to: start + int64(entry.CompressedSize64)}
	_, err = docparse.New(nil, docparse.Options{}).Parse(t.Context(), "bomb.zip", cr, int64(len(bomb)))
	fe := wantCode(t, err, docparse.ErrArchiveRejected, "images/zero.png", "100:1")
	if fe.Details["limit"] != "compression_ratio" {
		t.Errorf("details = %v", fe.Details)
	}
	if touched := cr.touched.Load(); touched != 0 {
		t.Errorf("%d reads touched the bomb's compressed data", touched)
	}

	// A header claiming a terabyte: refused on the declared size.
	payload := []byte("# tiny")
	claim := &zip.FileHeader{Name: "index.md", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(payload),
		CompressedSize64: 0, UncompressedSize64: 1 << 40}
	comp := deflate(t, payload)
	claim.CompressedSize64 = uint64(len(comp))
	_, err = parse(t, p, "claims.zip", buildZip(t, zipEntry{header: claim, data: comp}))
	wantCode(t, err, docparse.ErrArchiveRejected, "claims.zip")

	// A header understating the size: inflation stops at the declared size
	// and the entry is reported as damaged instead of being read on.
	real := bytes.Repeat([]byte("ab"), 256<<10)
	comp = deflate(t, real)
	liar := &zip.FileHeader{Name: "index.md", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(real),
		CompressedSize64: uint64(len(comp)), UncompressedSize64: 10}
	_, err = parse(t, p, "liar.zip", buildZip(t, zipEntry{header: liar, data: comp}))
	wantCode(t, err, docparse.ErrCorrupt, "liar.zip", "index.md")
}

func TestBundleEncryptedAndCorrupt(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	h := &zip.FileHeader{Name: "index.md", Method: zip.Store, Flags: 0x1, CRC32: 1, CompressedSize64: 16, UncompressedSize64: 4}
	_, err := parse(t, p, "locked.zip", buildZip(t, zipEntry{header: h, data: make([]byte, 16)}))
	wantCode(t, err, docparse.ErrEncrypted, "locked.zip", "password")

	good := buildZip(t, files("index.md", strings.Repeat("hello ", 100))...)
	_, err = parse(t, p, "cut.zip", good[:len(good)-30])
	wantCode(t, err, docparse.ErrCorrupt, "cut.zip")

	flipped := bytes.Clone(good)
	flipped[40] ^= 0xFF // inside the deflate stream of index.md
	_, err = parse(t, p, "flipped.zip", flipped)
	wantCode(t, err, docparse.ErrCorrupt, "flipped.zip")
}
