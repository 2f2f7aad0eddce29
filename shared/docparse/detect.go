package docparse

import (
	"bytes"
	"encoding/binary"
	"io"
	"path"
	"strings"
	"unicode/utf16"
)

// Magic numbers.
var (
	magicPDF     = []byte("%PDF-")
	magicZIP     = []byte("PK\x03\x04")
	magicZIPNone = []byte("PK\x05\x06") // an empty archive: end record only
	magicZIPSpan = []byte("PK\x07\x08")
	magicCFB     = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1} // OLE compound file
	magicPNG     = []byte("\x89PNG\r\n\x1a\n")
	magicJPEG    = []byte{0xFF, 0xD8, 0xFF}
	magicGIF     = []byte("GIF8")
	magicTIFFLE  = []byte("II*\x00")
	magicTIFFBE  = []byte("MM\x00*")
	magicGZIP    = []byte{0x1F, 0x8B}
	magic7Z      = []byte{'7', 'z', 0xBC, 0xAF, 0x27, 0x1C}
	magicRAR     = []byte("Rar!\x1a\x07")
	bomUTF8      = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16LE   = []byte{0xFF, 0xFE}
	bomUTF16BE   = []byte{0xFE, 0xFF}
)

type imageKind struct {
	ext         string // canonical extension
	contentType string
	desc        string
}

// sniffImage recognises the image types OCR engines accept (and GIF/WebP, to
// name them in messages).
func sniffImage(b []byte) *imageKind {
	switch {
	case bytes.HasPrefix(b, magicPNG):
		return &imageKind{extPNG, "image/png", "a PNG image"}
	case bytes.HasPrefix(b, magicJPEG):
		return &imageKind{extJPEG, "image/jpeg", "a JPEG image"}
	case bytes.HasPrefix(b, magicTIFFLE), bytes.HasPrefix(b, magicTIFFBE):
		return &imageKind{extTIFF, "image/tiff", "a TIFF image"}
	case isBMP(b):
		return &imageKind{extBMP, "image/bmp", "a BMP image"}
	case bytes.HasPrefix(b, magicGIF):
		return &imageKind{".gif", "image/gif", "a GIF image"}
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return &imageKind{".webp", "image/webp", "a WebP image"}
	}
	return nil
}

// isBMP checks "BM" and a known DIB header size, so text starting with "BM"
// is not taken for a bitmap.
func isBMP(b []byte) bool {
	if len(b) < 18 || b[0] != 'B' || b[1] != 'M' {
		return false
	}
	switch binary.LittleEndian.Uint32(b[14:18]) {
	case 12, 40, 52, 56, 64, 108, 124:
		return true
	}
	return false
}

func isZIP(b []byte) bool {
	return bytes.HasPrefix(b, magicZIP) || bytes.HasPrefix(b, magicZIPNone) || bytes.HasPrefix(b, magicZIPSpan)
}

func isPDF(b []byte) bool {
	// Readers accept the header anywhere in the first 1024 bytes.
	return bytes.Contains(b[:min(len(b), 1024)], magicPDF)
}

// describeBinary names a known binary format, or returns "".
func describeBinary(b []byte) string {
	if k := sniffImage(b); k != nil {
		return k.desc
	}
	switch {
	case bytes.HasPrefix(b, magicPDF):
		return "a PDF document"
	case isZIP(b):
		return "a ZIP archive or an Office document"
	case bytes.HasPrefix(b, magicCFB):
		return "a legacy Office file (.doc/.xls/.ppt) or an encrypted Office document"
	case bytes.HasPrefix(b, magicGZIP):
		return "a gzip archive"
	case bytes.HasPrefix(b, magic7Z):
		return "a 7-Zip archive"
	case bytes.HasPrefix(b, magicRAR):
		return "a RAR archive"
	}
	return ""
}

// Detect checks that head (the first bytes of the file, ideally 8 KiB)
// matches the extension of filename and returns the lower-cased extension.
// Unknown extensions → ErrUnsupported; no bytes → ErrEmpty; content of
// another type → ErrWrongType. An OLE compound file under an Office extension
// is ErrEncrypted when head shows the encryption streams and ErrWrongType
// otherwise; Parse, which sees the whole file, tells them apart reliably.
func Detect(filename string, head []byte) (string, error) {
	return detect(filename, head, nil, 0)
}

// detect is Detect with access to the whole file (r may be nil).
func detect(filename string, head []byte, r io.ReaderAt, size int64) (string, error) {
	name := baseName(filename)
	ext := strings.ToLower(path.Ext(name))
	if ext == "" || !isSupported(ext) {
		return "", unsupported(name, ext)
	}
	if len(head) == 0 {
		return "", coded(ErrEmpty, "%s is empty (0 bytes)", name)
	}
	switch {
	case ext == extPDF:
		if !isPDF(head) {
			return "", mismatch(name, ext, head, "a PDF document (it must start with %PDF-)")
		}
	case ext == extDOCX || ext == extPPTX || ext == extXLSX:
		if bytes.HasPrefix(head, magicCFB) {
			if cfbEncrypted(head, r, size) {
				return "", coded(ErrEncrypted, "%s is password-protected; remove the password in Office and upload it again", name)
			}
			return "", coded(ErrWrongType, "%s is a legacy binary Office file (.doc/.xls/.ppt) renamed to %s; open it in Office and save it as %s", name, ext, ext)
		}
		if !isZIP(head) {
			return "", mismatch(name, ext, head, "an Office Open XML document (a ZIP container)")
		}
	case ext == extZIP:
		if !isZIP(head) {
			return "", mismatch(name, ext, head, "a ZIP archive")
		}
	case isImageExt(ext):
		// A PNG named .jpg is common and harmless: any OCR-able image is
		// accepted under any image extension.
		if k := sniffImage(head); k == nil || !isImageExt(k.ext) {
			return "", mismatch(name, ext, head, "a PNG, JPEG, BMP or TIFF image")
		}
	default: // text formats
		if what := describeBinary(head); what != "" {
			return "", coded(ErrWrongType, "%s has the extension %s but its content is %s; rename it or upload the right file", name, ext, what)
		}
		if !looksLikeText(head) {
			return "", coded(ErrWrongType, "%s has the extension %s but its content is binary data, not text", name, ext)
		}
	}
	return ext, nil
}

func isSupported(ext string) bool {
	for _, e := range SupportedExtensions() {
		if e == ext {
			return true
		}
	}
	return false
}

func mismatch(name, ext string, head []byte, want string) error {
	what := describeBinary(head)
	switch {
	case what != "":
		return coded(ErrWrongType, "%s has the extension %s but its content is %s, not %s; rename it or upload the right file", name, ext, what, want)
	case looksLikeText(head):
		return coded(ErrWrongType, "%s has the extension %s but its content is text, not %s", name, ext, want)
	}
	return coded(ErrWrongType, "%s has the extension %s but its content is not %s", name, ext, want)
}

// looksLikeText accepts UTF-16 with a BOM, and otherwise anything without NUL
// bytes (UTF-8 and legacy 8-bit encodings such as GB18030).
func looksLikeText(b []byte) bool {
	if bytes.HasPrefix(b, bomUTF16LE) || bytes.HasPrefix(b, bomUTF16BE) {
		return true
	}
	return !bytes.Contains(b, []byte{0})
}

// Encrypted OOXML files are OLE compound files holding these streams
// (MS-OFFCRYPTO); directory entry names are UTF-16LE.
var (
	cfbEncryptedPackage = utf16le("EncryptedPackage")
	cfbEncryptionInfo   = utf16le("EncryptionInfo")
)

func utf16le(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.LittleEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// cfbEncrypted looks for the encryption stream names in head, and when r is
// given, in the whole file (the directory sector can be anywhere).
func cfbEncrypted(head []byte, r io.ReaderAt, size int64) bool {
	has := func(b []byte) bool {
		return bytes.Contains(b, cfbEncryptedPackage) || bytes.Contains(b, cfbEncryptionInfo)
	}
	if has(head) {
		return true
	}
	if r == nil {
		return false
	}
	const chunk = 1 << 20
	overlap := len(cfbEncryptedPackage)
	buf := make([]byte, chunk+overlap)
	for off := int64(0); off < size; off += chunk {
		n, _ := r.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if has(buf[:n]) {
			return true
		}
		if n == 0 {
			break
		}
	}
	return false
}
