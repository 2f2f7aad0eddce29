// Package pdf extracts the text layer of PDF files, page by page, in reading
// order: lines assembled from positioned glyphs, two- and three-column
// layouts read column by column (with full-width titles, headers and
// footers kept in place), paragraphs separated by blank lines, hyphenated
// line ends joined, ligatures expanded, CJK text without inserted spaces.
// The text of annotation appearances (filled-in form fields, free text) is
// included after the page content. Pages without extractable text are
// reported so that the caller can OCR them.
//
// Extraction is pure Go: objects and streams are read with
// github.com/ledongthuc/pdf; content streams, fonts, CMaps and layout are
// handled here. Whatever the input, Extract returns an error instead of
// panicking.
//
// Imported by: shared/docparse (the format dispatcher) and the benchmark
// harness (MeasurePagesPerSecond). May import: the standard library,
// github.com/ledongthuc/pdf, golang.org/x/text.
package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	lpdf "github.com/ledongthuc/pdf"
)

// Errors returned by Extract, wrapped with detail; test with errors.Is.
var (
	// ErrCorrupt: not a PDF, or a PDF whose structure (header, cross-
	// reference table, trailer, catalog, page tree) cannot be read,
	// including truncated files.
	ErrCorrupt = errors.New("pdf: corrupt or unreadable file")
	// ErrEncrypted: the file is encrypted and its text cannot be read: it
	// needs a password, or uses a scheme the reader does not implement
	// (AES-256, RC4 keys shorter than 128 bits, non-standard handlers).
	// Files encrypted with an empty user password (owner restrictions only)
	// using RC4-128 or AES-128 are not an error: they are extracted and
	// reported with Text.Encrypted set.
	ErrEncrypted = errors.New("pdf: encrypted file")
	// ErrEmpty: zero bytes.
	ErrEmpty = errors.New("pdf: empty file")
	// ErrTooLarge: the file exceeds Extractor.MaxBytes or MaxPages, or a
	// page's content exceeds the per-stream limit.
	ErrTooLarge = errors.New("pdf: file too large")
)

// Defaults of New.
const (
	DefaultMaxPages = 2000
	DefaultMaxBytes = 512 << 20
)

// maxStreamBytes bounds one decoded content stream, form or CMap: a small
// compressed stream can inflate to gigabytes.
const maxStreamBytes = 256 << 20

// Text is the text of a PDF.
type Text struct {
	// Pages holds the text of each page, in page order; "" for pages listed
	// in ScannedPages.
	Pages []string
	// Encrypted reports a file encrypted with an empty user password: its
	// text was extracted and is complete.
	Encrypted bool
	// ScannedPages lists, 1-based, the pages with no extractable text: no
	// text layer (scans, blank pages, text drawn as paths), text in fonts
	// with no Unicode mapping, or content that could not be decoded.
	ScannedPages []int
}

// Extractor extracts text from PDF files. Its fields are limits; the zero
// value of a field means no limit. An Extractor is safe for concurrent use.
type Extractor struct {
	// MaxPages rejects documents with more pages (ErrTooLarge).
	MaxPages int
	// MaxBytes rejects larger files (ErrTooLarge).
	MaxBytes int64
}

// New returns an Extractor with the default limits.
func New() *Extractor {
	return &Extractor{MaxPages: DefaultMaxPages, MaxBytes: DefaultMaxBytes}
}

// Extract reads the PDF of size bytes from r. r is only read, through
// ReadAt, and may be shared by concurrent calls. ctx is checked between
// pages; a cancelled extraction returns an error wrapping ctx.Err().
//
// A page whose content stream cannot be decoded (an unsupported filter,
// corrupt compressed data) does not fail the document: it is reported in
// ScannedPages, so that the caller can OCR it. A document none of whose
// pages can be decoded fails with ErrCorrupt.
func (e *Extractor) Extract(ctx context.Context, r io.ReaderAt, size int64) (text Text, err error) {
	switch {
	case size == 0:
		return Text{}, ErrEmpty
	case size < 0:
		return Text{}, fmt.Errorf("%w: negative size %d", ErrCorrupt, size)
	case e.MaxBytes > 0 && size > e.MaxBytes:
		return Text{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, e.MaxBytes)
	}
	if err := ctx.Err(); err != nil {
		return Text{}, fmt.Errorf("pdf: %w", err)
	}
	defer func() {
		// The PDF library reports malformed input by panicking, sometimes
		// from places its own recovery does not cover.
		if p := recover(); p != nil {
			text, err = Text{}, fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()

	src, size, err := normalizeSource(r, size)
	if err != nil {
		return Text{}, err
	}
	rd, err := lpdf.NewReader(src, size)
	if err != nil {
		if errors.Is(err, lpdf.ErrInvalidPassword) || hasEncryptEntry(src, size) {
			return Text{}, fmt.Errorf("%w: %v", ErrEncrypted, err)
		}
		return Text{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	trailer := rd.Trailer()
	if enc := trailer.Key("Encrypt"); enc.Kind() == lpdf.Dict {
		text.Encrypted = true
		// The library derives RC4 object keys as if every file key were
		// 128 bits long; shorter keys would decrypt to garbage.
		bits := enc.Key("Length").Int64()
		if bits == 0 {
			bits = 40
		}
		if enc.Key("V").Int64() != 4 && bits < 128 {
			return Text{}, fmt.Errorf("%w: RC4 with a %d-bit key is not supported", ErrEncrypted, bits)
		}
	}

	root := trailer.Key("Root").Key("Pages")
	if root.Kind() != lpdf.Dict {
		return Text{}, fmt.Errorf("%w: no page tree", ErrCorrupt)
	}
	if n := root.Key("Count").Int64(); e.MaxPages > 0 && n > int64(e.MaxPages) {
		return Text{}, fmt.Errorf("%w: %d pages, limit %d", ErrTooLarge, n, e.MaxPages)
	}
	pages, err := collectPages(root, e.MaxPages)
	if err != nil {
		return Text{}, err
	}

	d := newDocument()
	text.Pages = make([]string, len(pages))
	var firstErr error
	failed := 0
	for i, p := range pages {
		if err := ctx.Err(); err != nil {
			return Text{}, fmt.Errorf("pdf: page %d: %w", i+1, err)
		}
		t, err := d.pageText(p)
		if errors.Is(err, ErrTooLarge) {
			return Text{}, fmt.Errorf("page %d: %w", i+1, err)
		}
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = fmt.Errorf("page %d: %v", i+1, err)
			}
		}
		text.Pages[i] = t
		if t == "" {
			text.ScannedPages = append(text.ScannedPages, i+1)
		}
	}
	if failed > 0 && failed == len(pages) {
		return Text{}, fmt.Errorf("%w: %v", ErrCorrupt, firstErr)
	}
	return text, nil
}

// MeasurePagesPerSecond extracts every file once with the default
// Extractor, one after the other, and returns the pages extracted per
// second of wall time. The benchmark harness compares it with pdftotext on
// the same files.
func MeasurePagesPerSecond(ctx context.Context, files [][]byte) (float64, error) {
	e := New()
	pages := 0
	start := time.Now()
	for i, f := range files {
		t, err := e.Extract(ctx, bytes.NewReader(f), int64(len(f)))
		if err != nil {
			return 0, fmt.Errorf("file %d: %w", i, err)
		}
		pages += len(t.Pages)
	}
	secs := time.Since(start).Seconds()
	if secs <= 0 {
		return 0, nil
	}
	return float64(pages) / secs, nil
}

// normalizeSource adapts common deviations the PDF library rejects: bytes
// before the "%PDF-" header, a header version other than 1.0–1.7 (PDF 2.0)
// and garbage after the final "%%EOF".
func normalizeSource(r io.ReaderAt, size int64) (io.ReaderAt, int64, error) {
	head := make([]byte, min(size, 1024))
	if n, _ := r.ReadAt(head, 0); n < len(head) {
		return nil, 0, fmt.Errorf("%w: short read", ErrCorrupt)
	}
	k := bytes.Index(head, []byte("%PDF-"))
	if k < 0 {
		return nil, 0, fmt.Errorf("%w: not a PDF file", ErrCorrupt)
	}
	if k > 0 {
		r = io.NewSectionReader(r, int64(k), size-int64(k))
		size -= int64(k)
		head = head[k:]
	}
	if len(head) >= 9 {
		v := head[5:9]
		ok := v[0] == '1' && v[1] == '.' && v[2] >= '0' && v[2] <= '7' && (v[3] == '\r' || v[3] == '\n')
		if !ok {
			r = &headerPatch{ReaderAt: r}
		}
	}
	tailLen := min(size, 1024)
	tail := make([]byte, tailLen)
	if n, _ := r.ReadAt(tail, size-tailLen); n == len(tail) {
		if i := bytes.LastIndex(tail, []byte("%%EOF")); i >= 0 {
			if len(bytes.TrimRight(tail[i+5:], "\r\n\t \x00")) > 0 || bytes.ContainsRune(tail[i+5:], 0) {
				size = size - tailLen + int64(i) + 5
			}
		}
	}
	return r, size, nil
}

// headerPatch presents the header as "%PDF-1.7\n"; the version only
// matters to the library's header check.
type headerPatch struct{ io.ReaderAt }

func (h *headerPatch) ReadAt(p []byte, off int64) (int, error) {
	n, err := h.ReaderAt.ReadAt(p, off)
	const hdr = "%PDF-1.7\n"
	for i := 0; i < n; i++ {
		if o := off + int64(i); o >= 5 && o < int64(len(hdr)) {
			p[i] = hdr[o]
		}
	}
	return n, err
}

// hasEncryptEntry looks for an /Encrypt key near the trailers (the end of
// the file, and the start for linearized files), to classify open errors.
func hasEncryptEntry(r io.ReaderAt, size int64) bool {
	look := func(off, n int64) bool {
		buf := make([]byte, n)
		m, _ := r.ReadAt(buf, off)
		return bytes.Contains(buf[:m], []byte("/Encrypt"))
	}
	n := min(size, 64<<10)
	return look(size-n, n) || look(0, min(size, 16<<10))
}

// pageRef is a page dictionary with its inherited resources.
type pageRef struct {
	v, res lpdf.Value
}

// collectPages walks the page tree once, in order. Inherited Resources are
// passed down (other inheritable attributes do not affect text). limit
// bounds the pages (ErrTooLarge); cycles and absurd trees are ErrCorrupt.
func collectPages(root lpdf.Value, limit int) ([]pageRef, error) {
	type node struct {
		v, res lpdf.Value
		depth  int
	}
	budget := 1 << 20
	if limit > 0 {
		budget = 4*limit + 1024
	}
	var pages []pageRef
	stack := []node{{v: root, res: root.Key("Resources")}}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if budget--; budget < 0 || n.depth > 64 {
			return nil, fmt.Errorf("%w: page tree too deep, too large or cyclic", ErrCorrupt)
		}
		if n.v.Kind() != lpdf.Dict {
			continue // a dangling reference: skip it as viewers do
		}
		res := n.v.Key("Resources")
		if res.Kind() != lpdf.Dict {
			res = n.res
		}
		kids := n.v.Key("Kids")
		if t := n.v.Key("Type").Name(); t == "Pages" || (t != "Page" && kids.Kind() == lpdf.Array) {
			for i := kids.Len() - 1; i >= 0; i-- {
				stack = append(stack, node{v: kids.Index(i), res: res, depth: n.depth + 1})
			}
			continue
		}
		pages = append(pages, pageRef{v: n.v, res: res})
		if limit > 0 && len(pages) > limit {
			return nil, fmt.Errorf("%w: more than %d pages", ErrTooLarge, limit)
		}
	}
	return pages, nil
}

// document holds what one Extract call caches across pages: fonts and
// forms by object, and scratch buffers.
type document struct {
	fonts    map[string]*font
	forms    map[string]*form
	fallback *font
	in       interp
	lay      layout
}

// form is a decoded form XObject.
type form struct {
	key    string
	data   []byte
	matrix matrix
	res    *resources // nil: the form uses its caller's resources
}

func newDocument() *document {
	d := &document{fonts: make(map[string]*font), forms: make(map[string]*form)}
	d.in.doc = d
	return d
}

// pageText extracts one page. Panics from the PDF library while reading the
// page become an error for this page only.
func (d *document) pageText(p pageRef) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("%v", r)
		}
	}()
	data, err := contentData(p.v.Key("Contents"))
	if err != nil {
		return "", err
	}
	in := &d.in
	in.glyphs = in.glyphs[:0]
	in.stack = in.stack[:0]
	in.forms = in.forms[:0]
	in.depth = 0
	in.gs = gstate{ctm: identity(), hscale: 1}
	in.tm, in.tlm = identity(), identity()
	res := &resources{v: p.res, fonts: make(map[string]*font)}
	in.run(data, res)
	d.annotations(p.v.Key("Annots"), res)
	return d.lay.page(in.glyphs), nil
}

// annotations draws the appearance streams of a page's annotations —
// filled-in form fields, free text, stamps — where a viewer shows them.
func (d *document) annotations(annots lpdf.Value, res *resources) {
	in := &d.in
	for i, n := 0, min(annots.Len(), 1000); i < n; i++ {
		a := annots.Index(i)
		switch a.Key("Subtype").Name() {
		case "Link", "Popup":
			continue
		}
		if a.Key("F").Int64()&2 != 0 { // hidden
			continue
		}
		ap := a.Key("AP").Key("N")
		if ap.Kind() == lpdf.Dict { // appearance states: the current one
			ap = ap.Key(a.Key("AS").Name())
		}
		rect := a.Key("Rect")
		if ap.Kind() != lpdf.Stream || rect.Len() != 4 {
			continue
		}
		fm := d.form(ap, res)
		bbox := ap.Key("BBox")
		if fm == nil || bbox.Len() != 4 {
			continue
		}
		// PDF 32000-1 12.5.5: the form's BBox, transformed by its Matrix,
		// is fitted to the annotation's Rect.
		x0, y0 := math.Inf(1), math.Inf(1)
		x1, y1 := math.Inf(-1), math.Inf(-1)
		for _, c := range [4][2]int{{0, 1}, {0, 3}, {2, 1}, {2, 3}} {
			px, py := bbox.Index(c[0]).Float64(), bbox.Index(c[1]).Float64()
			m := fm.matrix
			tx, ty := px*m[0]+py*m[2]+m[4], px*m[1]+py*m[3]+m[5]
			x0, y0, x1, y1 = min(x0, tx), min(y0, ty), max(x1, tx), max(y1, ty)
		}
		rx0, ry0, rx1, ry1 := rect.Index(0).Float64(), rect.Index(1).Float64(), rect.Index(2).Float64(), rect.Index(3).Float64()
		if x1-x0 <= 0 || y1-y0 <= 0 {
			continue
		}
		sx, sy := (math.Max(rx0, rx1)-math.Min(rx0, rx1))/(x1-x0), (math.Max(ry0, ry1)-math.Min(ry0, ry1))/(y1-y0)
		fit := matrix{sx, 0, 0, sy, math.Min(rx0, rx1) - x0*sx, math.Min(ry0, ry1) - y0*sy}
		in.gs = gstate{ctm: fit, hscale: 1}
		in.tm, in.tlm = identity(), identity()
		in.stack = in.stack[:0]
		in.forms = append(in.forms[:0], fm.key)
		in.depth = 1
		fres := fm.res
		if fres == nil {
			fres = res
		}
		in.gs.ctm = fm.matrix.mul(fit)
		in.run(fm.data, fres)
	}
}

// contentData returns a page's content: one stream or the concatenation of
// an array of streams. Data decoded before a decoding error is kept.
func contentData(c lpdf.Value) ([]byte, error) {
	switch c.Kind() {
	case lpdf.Null:
		return nil, nil
	case lpdf.Stream:
		return streamData(c)
	case lpdf.Array:
		var all []byte
		var firstErr error
		for i := 0; i < c.Len(); i++ {
			b, err := streamData(c.Index(i))
			if err != nil && firstErr == nil {
				firstErr = err
			}
			all = append(all, b...)
			all = append(all, '\n')
			if len(all) > maxStreamBytes {
				return nil, fmt.Errorf("%w: page content over %d bytes", ErrTooLarge, maxStreamBytes)
			}
		}
		if len(bytes.TrimSpace(all)) == 0 {
			return nil, firstErr
		}
		return all, nil
	}
	return nil, fmt.Errorf("contents is a %v", c.Kind())
}

func streamData(v lpdf.Value) ([]byte, error) {
	if v.Kind() != lpdf.Stream {
		return nil, nil
	}
	rc := v.Reader()
	defer rc.Close()
	data, err := readAllLimit(rc, maxStreamBytes)
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	if err != nil && len(data) == 0 {
		return nil, fmt.Errorf("decode content: %v", err)
	}
	return data, nil
}

// readAllLimit reads r to the end, failing with ErrTooLarge past limit.
// The data read before an error is returned with it.
func readAllLimit(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: stream over %d bytes", ErrTooLarge, limit)
	}
	return data, err
}

// font returns the font of a resource name, loading each font object once
// per document. Fonts are keyed by the text of their dictionary, whose
// references (to widths, descriptors, CMaps) identify it.
func (d *document) font(res *resources, name string) *font {
	if f, ok := res.fonts[name]; ok {
		return f
	}
	var f *font
	fv := res.v.Key("Font").Key(name)
	if fv.Kind() == lpdf.Dict {
		key := fv.String()
		if f = d.fonts[key]; f == nil {
			f = safeLoadFont(fv)
			d.fonts[key] = f
		}
	}
	res.fonts[name] = f
	return f
}

// safeLoadFont loads a font; a font the library cannot read falls back to
// a Latin guess rather than failing the page.
func safeLoadFont(v lpdf.Value) (f *font) {
	defer func() {
		if recover() != nil {
			f = nil
		}
	}()
	return loadFont(v)
}

func (d *document) fallbackFont() *font {
	if d.fallback == nil {
		f := &font{sizeScale: 1}
		for c := 0; c < 256; c++ {
			if r := baseRune(encWinAnsi, byte(c)); r != 0 {
				f.text[c] = normalizeText(string(r))
				f.width[c] = helveticaWidth(r) / 1000
			}
		}
		d.fallback = f
	}
	return d.fallback
}

// form returns a decoded form XObject, cached per document: forms are often
// drawn on every page (letterheads, slide masters).
func (d *document) form(xo lpdf.Value, res *resources) *form {
	key := xo.String() // a stream prints as its header and file offset
	if fm, ok := d.forms[key]; ok {
		return fm
	}
	data, err := streamData(xo)
	if err != nil {
		d.forms[key] = nil
		return nil
	}
	fm := &form{key: key, data: data, matrix: identity()}
	if m := xo.Key("Matrix"); m.Len() == 6 {
		for i := range fm.matrix {
			fm.matrix[i] = m.Index(i).Float64()
		}
	}
	if r := xo.Key("Resources"); r.Kind() == lpdf.Dict {
		fm.res = &resources{v: r, fonts: make(map[string]*font)}
	}
	d.forms[key] = fm
	return fm
}
