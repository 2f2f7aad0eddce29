package docparse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// Image is a picture extracted from a document.
type Image struct {
	// Name is the image's path inside the document ("media/image1.png" for
	// Office files, the archive path for ZIP bundles, "images/…" for OCR
	// output). The Markdown links to exactly this name: ![](media/image1.png).
	Name        string
	ContentType string
	Data        []byte
}

// Result is a parsed document.
type Result struct {
	Markdown string
	Images   []Image
	// Pages is the page count of paged formats (PDF pages, PPTX slides) and 0
	// otherwise.
	Pages int
	// Format is the detected format: the lower-case extension without its dot,
	// with .htm reported as "html", .jpg as "jpeg" and .tif as "tiff".
	Format string
	// Warnings name content that was left out (images over the limits, rows
	// over MaxTableRows, unresolved bundle image links, scanned pages when OCR
	// is disabled). They are for logs and the task result, not for the model.
	Warnings []string
}

// Options configures a Parser. Zero values take the defaults listed.
type Options struct {
	// OCR recognises images and scanned PDFs; nil means no engine is
	// configured.
	OCR OCR
	// OCREngine is the engine id (e.g. "mineru_ocr"), used in messages. The
	// value "disable" keeps the original product's behaviour for PDFs: pages
	// without a text layer are left empty (with a warning) instead of failing,
	// as long as some page has text. Images always need an engine.
	OCREngine string
	// MaxImages caps the images extracted from one document (default 500);
	// further images are dropped with a warning.
	MaxImages int
	// MaxImageBytes caps one extracted image (default 20 MiB); larger images
	// are dropped with a warning.
	MaxImageBytes int64
	// MaxFileBytes caps the input (default 100 MiB, the upload limit).
	MaxFileBytes int64
	// MaxArchiveEntries caps the entries of a .zip bundle (default 1000).
	MaxArchiveEntries int
	// MaxArchiveBytes caps the total uncompressed bytes read from a .zip
	// bundle or an Office container (default 100 MiB).
	MaxArchiveBytes int64
	// MaxCompressionRatio rejects .zip bundle entries of 1 MiB or more that
	// compress better than this (default 100, i.e. 100:1).
	MaxCompressionRatio int
	// MaxTableRows caps the rows rendered per spreadsheet sheet and per CSV
	// file (default 50000); a note says how many were left out.
	MaxTableRows int
}

// Defaults.
const (
	defaultMaxImages           = 500
	defaultMaxImageBytes       = 20 << 20
	defaultMaxFileBytes        = 100 << 20
	defaultMaxArchiveEntries   = 1000
	defaultMaxArchiveBytes     = 100 << 20
	defaultMaxCompressionRatio = 100
	defaultMaxTableRows        = 50000
)

func (o Options) withDefaults() Options {
	if o.MaxImages <= 0 {
		o.MaxImages = defaultMaxImages
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = defaultMaxImageBytes
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = defaultMaxFileBytes
	}
	if o.MaxArchiveEntries <= 0 {
		o.MaxArchiveEntries = defaultMaxArchiveEntries
	}
	if o.MaxArchiveBytes <= 0 {
		o.MaxArchiveBytes = defaultMaxArchiveBytes
	}
	if o.MaxCompressionRatio <= 0 {
		o.MaxCompressionRatio = defaultMaxCompressionRatio
	}
	if o.MaxTableRows <= 0 {
		o.MaxTableRows = defaultMaxTableRows
	}
	return o
}

// PDFExtractor reads the text layer of a PDF; PDFTextLayer implements it over
// shared/docparse/pdf. Coded errors (encrypted_file, corrupt_file, …) pass
// through with the file name added; PDFText.Encrypted is encrypted_file; any
// other error is reported as corrupt_file.
type PDFExtractor interface {
	Extract(ctx context.Context, r io.ReaderAt, size int64) (PDFText, error)
}

// PDFText is the text layer of a PDF.
type PDFText struct {
	// Pages holds Markdown-ish text per page, in reading order.
	Pages []string
	// Encrypted reports a password-protected file; Pages is then empty.
	Encrypted bool
	// ScannedPages lists the 1-based numbers of pages that have no text layer
	// (an image of text), in ascending order.
	ScannedPages []int
}

// Parser converts documents. It holds no per-call state and is safe for
// concurrent use.
type Parser struct {
	pdf  PDFExtractor
	opts Options
}

// New returns a Parser. pdf may be nil when PDFs are not parsed (they then
// need an OCR engine).
func New(pdf PDFExtractor, opts Options) *Parser {
	return &Parser{pdf: pdf, opts: opts.withDefaults()}
}

// Extensions, with their dot.
const (
	extTXT  = ".txt"
	extMD   = ".md"
	extHTML = ".html"
	extHTM  = ".htm"
	extDOCX = ".docx"
	extPPTX = ".pptx"
	extXLSX = ".xlsx"
	extCSV  = ".csv"
	extJSON = ".json"
	extPDF  = ".pdf"
	extZIP  = ".zip"
	extPNG  = ".png"
	extJPG  = ".jpg"
	extJPEG = ".jpeg"
	extBMP  = ".bmp"
	extTIF  = ".tif"
	extTIFF = ".tiff"
)

// imageExts are the image types the original sends to OCR (parser
// capabilities IMAGE_FILE_EXTENSIONS).
var imageExts = []string{extBMP, extJPEG, extJPG, extPNG, extTIF, extTIFF}

// IsImage reports whether ext (".png" or "png", any case) is an image type,
// which Parse reads through the OCR engine.
func IsImage(ext string) bool {
	return isImageExt("." + strings.TrimPrefix(strings.ToLower(ext), "."))
}

// SupportedExtensions lists the extensions Parse accepts, sorted, with dots.
func SupportedExtensions() []string {
	exts := []string{extCSV, extDOCX, extHTM, extHTML, extJSON, extMD, extPDF, extPPTX, extTXT, extXLSX, extZIP}
	exts = append(exts, imageExts...)
	slices.Sort(exts)
	return exts
}

func isImageExt(ext string) bool { return slices.Contains(imageExts, ext) }

// headSize is how much of the file Detect looks at.
const headSize = 8 << 10

// Parse converts the document named filename (only its extension and base
// name are used) of size bytes read from r into Markdown.
func (p *Parser) Parse(ctx context.Context, filename string, r io.ReaderAt, size int64) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	name := baseName(filename)
	if size <= 0 {
		return Result{}, coded(ErrEmpty, "%s is empty (0 bytes)", name)
	}
	if size > p.opts.MaxFileBytes {
		return Result{}, coded(ErrTooLarge, "%s is %s; the limit is %s", name, humanBytes(size), humanBytes(p.opts.MaxFileBytes))
	}
	head := make([]byte, min(size, headSize))
	if n, err := r.ReadAt(head, 0); n < len(head) {
		return Result{}, fmt.Errorf("read %s: %w", name, err)
	}
	ext, err := detect(filename, head, r, size)
	if err != nil {
		return Result{}, err
	}
	var res Result
	switch {
	case ext == extTXT || ext == extMD:
		res, err = p.parseText(name, r, size)
	case ext == extHTML || ext == extHTM:
		res, err = p.parseHTML(ctx, name, r, size)
	case ext == extCSV:
		res, err = p.parseCSV(ctx, name, r, size)
	case ext == extJSON:
		res, err = p.parseJSON(name, r, size)
	case ext == extDOCX:
		res, err = p.parseDOCX(ctx, name, r, size)
	case ext == extPPTX:
		res, err = p.parsePPTX(ctx, name, r, size)
	case ext == extXLSX:
		res, err = p.parseXLSX(ctx, name, r, size)
	case ext == extPDF:
		res, err = p.parsePDF(ctx, name, r, size)
	case ext == extZIP:
		res, err = p.parseBundle(ctx, name, r, size)
	case isImageExt(ext):
		res, err = p.parseImage(ctx, name, head, r, size)
	default:
		// detect only returns supported extensions.
		return Result{}, unsupported(name, ext)
	}
	if err != nil {
		return Result{}, err
	}
	if res.Format == "" {
		res.Format = formatName(ext)
	}
	if strings.TrimSpace(res.Markdown) == "" && len(res.Images) == 0 {
		return Result{}, coded(ErrEmpty, "no text could be extracted from %s", name)
	}
	return res, nil
}

func formatName(ext string) string {
	switch ext {
	case extHTM:
		return "html"
	case extJPG:
		return "jpeg"
	case extTIF:
		return "tiff"
	}
	return strings.TrimPrefix(ext, ".")
}

func unsupported(name, ext string) error {
	e := coded(ErrUnsupported, "%s: %q files are not supported; supported types: %s",
		name, ext, strings.Join(SupportedExtensions(), " "))
	return e.With(map[string]any{"supported": SupportedExtensions()})
}

// readAll reads the whole input; size is already bounded by MaxFileBytes.
func readAll(r io.ReaderAt, size int64) ([]byte, error) {
	b := make([]byte, size)
	if n, err := r.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read input: %w", err)
	}
	return b, nil
}

// baseName strips any directory (with / or \) from a client-supplied name.
func baseName(filename string) string {
	b := path.Base(strings.ReplaceAll(filename, `\`, "/"))
	if b == "." || b == "/" {
		return "file"
	}
	return b
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// imageSet collects a document's images under the Options limits,
// deduplicating by name.
type imageSet struct {
	max      int
	maxBytes int64
	images   []Image
	seen     map[string]bool
	warnings []string
}

func (p *Parser) newImageSet() *imageSet {
	return &imageSet{max: p.opts.MaxImages, maxBytes: p.opts.MaxImageBytes, seen: map[string]bool{}}
}

// admit reports whether an image of size bytes named name may be added
// (true as well when it already was).
func (s *imageSet) admit(name string, size int64) bool {
	if s.seen[name] {
		return true
	}
	if len(s.images) >= s.max {
		s.warnings = append(s.warnings, fmt.Sprintf("image %s left out: more than %d images", name, s.max))
		return false
	}
	if size > s.maxBytes {
		s.warnings = append(s.warnings, fmt.Sprintf("image %s left out: %s is over the %s limit", name, humanBytes(size), humanBytes(s.maxBytes)))
		return false
	}
	return true
}

func (s *imageSet) add(name, contentType string, data []byte) bool {
	if !s.admit(name, int64(len(data))) {
		return false
	}
	if !s.seen[name] {
		s.seen[name] = true
		if contentType == "" {
			contentType = imageContentType(name, data)
		}
		s.images = append(s.images, Image{Name: name, ContentType: contentType, Data: data})
	}
	return true
}

// imageContentType names an image's media type from its extension, falling
// back to its magic number.
func imageContentType(name string, data []byte) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg", ".jpe":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".bmp":
		return "image/bmp"
	case ".tif", ".tiff":
		return "image/tiff"
	case ".webp":
		return "image/webp"
	case ".svg":
		return "image/svg+xml"
	case ".emf":
		return "image/x-emf"
	case ".wmf":
		return "image/x-wmf"
	}
	if k := sniffImage(data); k != nil {
		return k.contentType
	}
	return "application/octet-stream"
}

// markdownTable renders rows as a GitHub-flavoured Markdown table whose first
// row is the header. Rows are padded to the widest row.
func markdownTable(rows [][]string) string {
	width := 0
	for _, r := range rows {
		width = max(width, len(r))
	}
	if width == 0 {
		return ""
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = tableCell(cells[i])
			}
			b.WriteString(" ")
			b.WriteString(c)
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	line(rows[0])
	b.WriteString("|")
	for range width {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows[1:] {
		line(r)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// tableCell makes text safe inside a table cell: one line, pipes escaped.
func tableCell(s string) string {
	if !strings.ContainsAny(s, "\r\n|") {
		return strings.TrimSpace(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			b.WriteByte(' ')
		case '\n':
			b.WriteByte(' ')
		case '|':
			b.WriteString(`\|`)
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
