package userfiles

import (
	"bytes"
	"mime"
	"path"
	"strings"
	"unicode/utf8"
)

// Preview is a file's content as the viewer shows it (the original's
// {content, preview_type, supported, message}).
type Preview struct {
	Content     *string `json:"content"`
	PreviewType string  `json:"preview_type"`
	Supported   bool    `json:"supported"`
	Message     *string `json:"message"`
	Size        int64   `json:"size"`
	Truncated   bool    `json:"truncated"`
}

var (
	markdownExts = set(".md", ".markdown", ".mdx")
	textExts     = set(".txt", ".text", ".log", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".csv", ".tsv",
		".py", ".js", ".ts", ".jsx", ".tsx", ".vue", ".html", ".htm", ".css", ".less", ".scss", ".xml", ".sql", ".sh", ".bash",
		".zsh", ".fish", ".env", ".dockerfile", ".gitignore", ".go", ".rs", ".java", ".c", ".h", ".cpp", ".rb", ".r")
	imageExts = set(".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".svg")
)

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

var binarySignatures = [][]byte{[]byte("\x7fELF"), []byte("MZ"), []byte("%PDF-"), []byte("PK\x03\x04"), []byte("PK\x05\x06"),
	[]byte("\x89PNG\r\n\x1a\n"), []byte("\xff\xd8\xff"), []byte("GIF87a"), []byte("GIF89a"), []byte("RIFF")}

// previewType classifies a file by name and first bytes, as the original:
// image, pdf, markdown, text or unsupported (with a reason).
func previewType(name string, head []byte) (kind string, supported bool, message string) {
	ext := strings.ToLower(path.Ext(name))
	mt := mime.TypeByExtension(ext)
	if len(head) > 1024 {
		head = head[:1024]
	}
	switch {
	case imageExts[ext] || strings.HasPrefix(mt, "image/"):
		return "image", true, ""
	case ext == ".pdf" || bytes.HasPrefix(head, []byte("%PDF-")):
		return "pdf", true, ""
	case markdownExts[ext]:
		return "markdown", true, ""
	case textExts[ext]:
		return "text", true, ""
	case bytes.IndexByte(head, 0) >= 0:
		return "unsupported", false, "this is a binary file; it cannot be previewed"
	}
	for _, sig := range binarySignatures {
		if bytes.HasPrefix(head, sig) {
			if bytes.HasPrefix(head, []byte("RIFF")) && len(head) >= 12 && string(head[8:12]) == "WEBP" {
				return "image", true, ""
			}
			return "unsupported", false, "this file format cannot be previewed"
		}
	}
	if strings.HasPrefix(mt, "application/") && !strings.Contains(mt, "json") && !strings.Contains(mt, "xml") && !strings.Contains(mt, "javascript") {
		return "unsupported", false, "this file format cannot be previewed"
	}
	if utf8.Valid(head) || len(head) == 0 {
		return "text", true, ""
	}
	return "unsupported", false, "this file is not readable text; it cannot be previewed"
}

func preview(name string, data []byte, size int64, truncated bool) Preview {
	kind, ok, msg := previewType(name, data)
	p := Preview{PreviewType: kind, Supported: ok, Size: size, Truncated: truncated}
	if msg != "" {
		p.Message = &msg
	}
	if ok && kind != "image" && kind != "pdf" {
		text := strings.ToValidUTF8(string(data), "\uFFFD")
		p.Content = &text
	}
	return p
}

// Served is a file to send: its bytes and how to send them safely.
type Served struct {
	Name        string
	Data        []byte
	ContentType string
	// Inline is true when the content type is safe to render in the
	// browser (raster images, PDF, plain text); everything else — HTML,
	// SVG, scripts, unknown types — is sent as an attachment.
	Inline bool
}

// imageType sniffs raster images by signature (never SVG: it runs script).
func imageType(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && bytes.HasPrefix(data, []byte("RIFF")) && string(data[8:12]) == "WEBP":
		return "image/webp"
	case bytes.HasPrefix(data, []byte("BM")):
		return "image/bmp"
	}
	return ""
}

// serve picks a safe content type: images by their signature, PDFs by
// theirs, UTF-8 text of any kind (HTML, SVG and scripts included) as
// text/plain, anything else as an octet stream to download.
func serve(name string, data []byte) Served {
	sv := Served{Name: name, Data: data, ContentType: "application/octet-stream"}
	kind, _, _ := previewType(name, data)
	switch {
	case imageType(data) != "":
		sv.ContentType, sv.Inline = imageType(data), true
	case bytes.HasPrefix(data, []byte("%PDF-")):
		sv.ContentType, sv.Inline = "application/pdf", true
	case (kind == "text" || kind == "markdown") && utf8.Valid(data):
		// HTML, SVG and XML too: shown as source, never rendered.
		sv.ContentType, sv.Inline = "text/plain; charset=utf-8", true
		if ext := strings.ToLower(path.Ext(name)); ext == ".md" || ext == ".markdown" {
			sv.ContentType = "text/markdown; charset=utf-8"
		}
	}
	return sv
}
