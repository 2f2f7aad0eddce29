package docparse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// parsePDF reads the text layer through the PDFExtractor and marks each
// page with "<!-- page N -->" so chunks can be traced back to pages. When
// some pages have no text layer (scans), the whole PDF goes to the OCR
// engine, whose Markdown replaces the text layer (engines lay out the full
// document; they cannot be given single pages without a renderer). Without
// an engine that is ocr_not_configured naming the pages, except with
// OCREngine "disable", where the text layer is kept as long as some page has
// text.
//
// Unlike the original, a PDF with a complete text layer is not sent to OCR
// even when an engine is configured: it is faster and needs no GPU.
func (p *Parser) parsePDF(ctx context.Context, name string, r io.ReaderAt, size int64) (Result, error) {
	if p.pdf == nil {
		if p.opts.OCR == nil {
			return Result{}, errors.New("docparse: no PDFExtractor and no OCR engine configured for PDFs")
		}
		return p.ocrDocument(ctx, name, r, size, 0)
	}
	text, err := p.pdf.Extract(ctx, r, size)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if fe, ok := failure.As(err); ok {
			// Name the file in the extractor's message.
			return Result{}, failure.New(fe.Kind, fe.Code, "%s: %s", name, fe.Message).With(fe.Details)
		}
		return Result{}, coded(ErrCorrupt, "%s could not be read as a PDF: %v", name, err)
	}
	if text.Encrypted {
		return Result{}, coded(ErrEncrypted, "%s is password-protected; remove the password and upload it again", name)
	}
	pages := len(text.Pages)
	res := Result{Pages: pages}
	if len(text.ScannedPages) > 0 {
		switch {
		case p.opts.OCR != nil:
			return p.ocrDocument(ctx, name, r, size, pages)
		case p.opts.OCREngine == "disable" && hasText(text.Pages):
			res.Warnings = append(res.Warnings, fmt.Sprintf("pages %s have no text layer and were left empty (OCR is disabled)", pageList(text.ScannedPages)))
		default:
			e := coded(ErrOCRNotConfigured, "%s: %s; %s", name, scannedPages(text.ScannedPages, pages), ocrHint())
			return Result{}, e.With(map[string]any{"pages": text.ScannedPages})
		}
	}
	var b strings.Builder
	for i, page := range text.Pages {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("<!-- page " + strconv.Itoa(i+1) + " -->")
		if t := strings.TrimSpace(normalizeNewlines(page)); t != "" {
			b.WriteString("\n\n" + t)
		}
	}
	if !hasText(text.Pages) {
		// Markers alone are no content; let Parse report the empty file.
		return res, nil
	}
	res.Markdown = b.String()
	return res, nil
}

func hasText(pages []string) bool {
	for _, p := range pages {
		if strings.TrimSpace(p) != "" {
			return true
		}
	}
	return false
}

func scannedPages(scanned []int, total int) string {
	switch {
	case len(scanned) >= total:
		return "no page has a text layer (it is a scan)"
	case len(scanned) == 1:
		return "page " + strconv.Itoa(scanned[0]) + " has no text layer (scanned)"
	}
	return "pages " + pageList(scanned) + " have no text layer (scanned)"
}

// pageList prints page numbers, collapsing runs: "1-3, 7".
func pageList(pages []int) string {
	var parts []string
	for i := 0; i < len(pages); {
		j := i
		for j+1 < len(pages) && pages[j+1] == pages[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(pages[i])+"-"+strconv.Itoa(pages[j]))
		} else {
			parts = append(parts, strconv.Itoa(pages[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// ocrHint tells the user how to get OCR.
func ocrHint() string {
	return "extracting its text needs OCR, but no OCR engine is configured. An administrator can choose a default engine (" +
		strings.Join(implementedOCREngines(), ", ") + ") under Settings → OCR, or pick one when uploading"
}

// parseImage sends an image to the OCR engine.
func (p *Parser) parseImage(ctx context.Context, name string, head []byte, r io.ReaderAt, size int64) (Result, error) {
	if p.opts.OCR == nil {
		return Result{}, coded(ErrOCRNotConfigured, "%s is an image: %s", name, ocrHint())
	}
	res, err := p.ocrDocument(ctx, name, r, size, 0)
	if err != nil {
		return Result{}, err
	}
	if k := sniffImage(head); k != nil {
		res.Format = formatName(k.ext)
	}
	return res, nil
}

// ocrDocument sends the whole file to the OCR engine.
func (p *Parser) ocrDocument(ctx context.Context, name string, r io.ReaderAt, size int64, pages int) (Result, error) {
	data, err := readAll(r, size)
	if err != nil {
		return Result{}, err
	}
	var md string
	var found []Image
	if ri, ok := p.opts.OCR.(ImageOCR); ok {
		md, found, err = ri.RecognizeImages(ctx, name, data)
	} else {
		md, err = p.opts.OCR.Recognize(ctx, name, data)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if isCoded(err) {
			return Result{}, err
		}
		return Result{}, coded(ErrOCRFailed, "%s: OCR engine %s failed: %v", name, p.engineName(), err)
	}
	imgs := p.newImageSet()
	for _, im := range found {
		imgs.add(im.Name, im.ContentType, im.Data)
	}
	return Result{Markdown: strings.TrimSpace(md), Images: imgs.images, Pages: pages, Warnings: imgs.warnings}, nil
}

func (p *Parser) engineName() string {
	if p.opts.OCREngine != "" {
		return p.opts.OCREngine
	}
	return "(unnamed)"
}
