package docparse

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// decodeText turns file bytes into a string: a UTF-8 BOM is dropped, UTF-16
// with a BOM is decoded, valid UTF-8 is kept, and anything else is read as
// GB18030 (the usual encoding of Chinese Excel/Notepad exports) or, when that
// yields replacement characters, as Windows-1252.
func decodeText(b []byte) string {
	switch {
	case bytes.HasPrefix(b, bomUTF8):
		b = b[len(bomUTF8):]
	case bytes.HasPrefix(b, bomUTF16LE):
		return decodeUTF16(b[2:], binary.LittleEndian)
	case bytes.HasPrefix(b, bomUTF16BE):
		return decodeUTF16(b[2:], binary.BigEndian)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	if s, err := simplifiedchinese.GB18030.NewDecoder().Bytes(b); err == nil && !bytes.ContainsRune(s, utf8.RuneError) {
		return string(s)
	}
	s, _ := charmap.Windows1252.NewDecoder().Bytes(b) // total: every byte maps
	return string(s)
}

func decodeUTF16(b []byte, order binary.ByteOrder) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = order.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// normalizeNewlines turns CRLF and lone CR into LF.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// parseText handles .txt and .md: the content is the Markdown.
func (p *Parser) parseText(name string, r io.ReaderAt, size int64) (Result, error) {
	b, err := readAll(r, size)
	if err != nil {
		return Result{}, err
	}
	return Result{Markdown: normalizeNewlines(decodeText(b))}, nil
}
