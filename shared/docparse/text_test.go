package docparse_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"unicode/utf16"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func utf16Bytes(s string, order binary.AppendByteOrder, bom []byte) []byte {
	out := append([]byte{}, bom...)
	for _, c := range utf16.Encode([]rune(s)) {
		out = order.AppendUint16(out, c)
	}
	return out
}

func TestTextAndMarkdownAreRaw(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"notes.txt", []byte("line one\r\nline two\rline three\n"), "line one\nline two\nline three\n"},
		{"readme.md", []byte("\xEF\xBB\xBF# Title\r\n\r\n- item\r\n"), "# Title\n\n- item\n"},
		{"le.txt", utf16Bytes("知识库\r\nok", binary.LittleEndian, []byte{0xFF, 0xFE}), "知识库\nok"},
		{"be.md", utf16Bytes("# 标题", binary.BigEndian, []byte{0xFE, 0xFF}), "# 标题"},
		{"gbk.txt", []byte{0xD6, 0xAA, 0xCA, 0xB6, 0xBF, 0xE2}, "知识库"}, // GBK/GB18030
		{"latin1.txt", []byte("caf\xe9 cr\xe8me"), "café crème"},
	}
	for _, c := range cases {
		res := mustParse(t, p, c.name, c.data)
		wantEqual(t, res.Markdown, c.want)
		if res.Pages != 0 || len(res.Images) != 0 {
			t.Errorf("%s: pages=%d images=%d, want none", c.name, res.Pages, len(res.Images))
		}
	}
	if f := mustParse(t, p, "x.md", []byte("x")).Format; f != "md" {
		t.Errorf("Format = %q, want md", f)
	}
}

func TestEmptyFiles(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	for _, name := range []string{"a.txt", "a.md", "a.pdf", "a.docx", "a.png", "a.zip", "a.csv", "a.json"} {
		_, err := parse(t, p, name, nil)
		wantCode(t, err, docparse.ErrEmpty, name, "0 bytes")
	}
	for name, data := range map[string][]byte{
		"blank.txt":  []byte(" \r\n\t\n"),
		"bom.md":     []byte("\xEF\xBB\xBF"),
		"blank.json": []byte("\n \n"),
		"blank.csv":  []byte("\n\n,,\n"),
		"blank.html": []byte("<html><head><title>t</title><script>x()</script></head><body> </body></html>"),
	} {
		_, err := parse(t, p, name, data)
		wantCode(t, err, docparse.ErrEmpty, name)
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{MaxFileBytes: 1 << 10})
	data := bytes.Repeat([]byte("a"), 1<<10+1)
	_, err := parse(t, p, "big.txt", data)
	wantCode(t, err, docparse.ErrTooLarge, "big.txt", "1 KiB")
	if _, err := parse(t, p, "ok.txt", data[:1<<10]); err != nil {
		t.Fatalf("a file at the limit: %v", err)
	}
}

func TestParseHonoursCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := []byte("hello")
	_, err := docparse.New(nil, docparse.Options{}).Parse(ctx, "a.txt", bytes.NewReader(data), int64(len(data)))
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestFilenameDirectoriesAreIgnored(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	_, err := parse(t, p, `C:\Users\me\evil\..\report.exe`, []byte("x"))
	wantCode(t, err, docparse.ErrUnsupported, "report.exe")
	if res := mustParse(t, p, "../../dir/notes.TXT", []byte("ok")); res.Markdown != "ok" || res.Format != "txt" {
		t.Fatalf("got %+v", res)
	}
}
