package docparse

import (
	"context"
	"errors"
	"io"

	"github.com/yuxi-serverless/yuxi/shared/docparse/pdf"
)

// PDFTextLayer adapts the pure-Go extractor of shared/docparse/pdf to
// PDFExtractor: it copies pdf.Text into PDFText and turns the extractor's
// sentinels into coded errors (pdf.ErrEncrypted → encrypted_file,
// pdf.ErrTooLarge → file_too_large, pdf.ErrEmpty → empty_file, anything else
// → corrupt_file).
//
// pdf.Text.Encrypted marks a file that is encrypted with an empty user
// password and was read completely; that is not a failure, so it does not
// set PDFText.Encrypted. Files that need a password come back as
// pdf.ErrEncrypted.
type PDFTextLayer struct {
	Extractor *pdf.Extractor
}

// NewPDFTextLayer returns the adapter with the extractor's default limits.
func NewPDFTextLayer() *PDFTextLayer {
	return &PDFTextLayer{Extractor: pdf.New()}
}

// Extract implements PDFExtractor.
func (l *PDFTextLayer) Extract(ctx context.Context, r io.ReaderAt, size int64) (PDFText, error) {
	t, err := l.Extractor.Extract(ctx, r, size)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return PDFText{}, ctx.Err()
		case errors.Is(err, pdf.ErrEncrypted):
			return PDFText{}, coded(ErrEncrypted, "it is password-protected or uses an unsupported encryption (%v); remove the password and upload it again", err)
		case errors.Is(err, pdf.ErrTooLarge):
			return PDFText{}, coded(ErrTooLarge, "%v", err)
		case errors.Is(err, pdf.ErrEmpty):
			return PDFText{}, coded(ErrEmpty, "%v", err)
		}
		return PDFText{}, coded(ErrCorrupt, "it could not be read as a PDF: %v", err)
	}
	return PDFText{Pages: t.Pages, ScannedPages: t.ScannedPages}, nil
}
