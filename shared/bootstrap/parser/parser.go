// Package parser opens the document parser (PDF text layer, office formats,
// HTML to Markdown, and the OCR service when one is configured). It is a
// package of its own so that only the processes that parse link the parsers.
//
// Imported by: the mains of doc-parse, intake (POST
// /api/knowledge/files/markdown) and tool-invoke (the agent's
// ocr_parse_file), infra/local, tests and benchmarks.
// May import: shared/bootstrap, shared/docparse and the standard library.
package parser

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// Open builds the parser of cfg. Without an OCR engine, PDFs keep whatever
// text layer they have (a blank page is not a scan) and fail only when no
// page has text; images fail.
func Open(cfg bootstrap.Config) (*docparse.Parser, error) {
	opts := docparse.Options{OCREngine: docparse.EngineDisable}
	if cfg.OCREngine != "" {
		ocr, err := docparse.NewOCR(cfg.OCREngine, cfg.OCRBaseURL, cfg.OCRToken, &http.Client{Timeout: 10 * time.Minute})
		if err != nil {
			return nil, fmt.Errorf("YUXI_OCR_ENGINE: %w", err)
		}
		opts.OCR, opts.OCREngine = ocr, cfg.OCREngine
	}
	return docparse.New(docparse.NewPDFTextLayer(), opts), nil
}

// Markdown adapts p to "document in, Markdown out" (the agent's
// ocr_parse_file; figures the OCR engine cut out are left out).
func Markdown(p *docparse.Parser) func(ctx context.Context, filename string, data []byte) (string, error) {
	return func(ctx context.Context, filename string, data []byte) (string, error) {
		res, err := p.Parse(ctx, filename, bytes.NewReader(data), int64(len(data)))
		return res.Markdown, err
	}
}

// MarkdownFor is Markdown of Open(cfg), opened on the first call, so a
// process that never parses pays nothing; a configuration error is each
// call's error.
func MarkdownFor(cfg bootstrap.Config) func(ctx context.Context, filename string, data []byte) (string, error) {
	var (
		once sync.Once
		p    *docparse.Parser
		err  error
	)
	return func(ctx context.Context, filename string, data []byte) (string, error) {
		once.Do(func() { p, err = Open(cfg) })
		if err != nil {
			return "", err
		}
		return Markdown(p)(ctx, filename, data)
	}
}
