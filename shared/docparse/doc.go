// Package docparse turns an uploaded document into Markdown plus the images it
// embeds: the parse step of knowledge-base ingestion (FileStatus uploaded →
// parsing → parsed) and of the agent's ocr_parse_file tool.
//
// It follows the per-extension rules of the original product
// (knowledge/parser/unified.py): .txt/.md raw; .html/.htm converted to
// Markdown; .docx/.pptx/.xlsx read from their Office Open XML parts; .csv as
// one Markdown table per data row; .json pretty-printed in a fence; .pdf
// through a PDFExtractor (PDFTextLayer over shared/docparse/pdf), sending scanned documents to
// an OCR engine; images only through OCR; .zip as a Markdown bundle with its
// images. Detect checks that the content matches the extension before any
// parser runs.
//
// Contracts:
//   - Parse never writes anywhere: embedded images come back in
//     Result.Images with the name the Markdown links to, and the caller
//     uploads them and rewrites the links (e.g. to the KB image proxy).
//   - Every rejection is a coded *failure.Error comparable with errors.Is to
//     the sentinels in errors.go (unsupported_file_type, file_type_mismatch,
//     empty_file, corrupt_file, encrypted_file, file_too_large,
//     archive_rejected, ocr_not_configured, ocr_failed). None of them is
//     worth retrying except ocr_failed.
//   - Archives (Office containers and .zip bundles) are never decompressed
//     beyond Options.MaxArchiveBytes, whatever their headers claim.
//   - OCR engines are called over HTTP with the caller's context; this
//     package never retries them.
//
// Imported by: the functions that parse documents (kb ingestion, the
// ocr_parse_file tool). May import: the standard library, shared/failure,
// shared/docparse/pdf (wrapped by PDFTextLayer; pdf must not import this
// package), html-to-markdown v2, golang.org/x/net/html and golang.org/x/text
// encodings. Parsers take their PDF extractor and OCR engine as interfaces so
// tests can script them.
package docparse
