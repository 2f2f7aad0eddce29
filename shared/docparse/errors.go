package docparse

import "github.com/yuxi-serverless/yuxi/shared/failure"

// Sentinels. Parse returns fresh errors with the same kind and code and a
// message naming the file and what was wrong; compare with errors.Is.
var (
	// ErrUnsupported: the extension is not one Parse handles. The upload route
	// answers 415 and lists SupportedExtensions (also in Details["supported"]).
	ErrUnsupported = failure.New(failure.KindUnsupportedMedia, "unsupported_file_type", "this file type is not supported")
	// ErrWrongType: the content does not match the extension (a PDF renamed
	// .docx, a .doc saved as .docx, binary data in a .txt).
	ErrWrongType = failure.Unprocessable("file_type_mismatch", "the file content does not match its extension")
	// ErrEmpty: zero bytes, or nothing could be extracted.
	ErrEmpty = failure.Unprocessable("empty_file", "the file is empty")
	// ErrCorrupt: the container or its parts cannot be read.
	ErrCorrupt = failure.Unprocessable("corrupt_file", "the file is damaged")
	// ErrEncrypted: password-protected PDF, Office file or ZIP entry.
	ErrEncrypted = failure.Unprocessable("encrypted_file", "the file is password-protected")
	// ErrTooLarge: the file is over Options.MaxFileBytes.
	ErrTooLarge = failure.New(failure.KindTooLarge, "file_too_large", "the file is too large")
	// ErrArchiveRejected: a ZIP bundle or Office container broke a safety
	// limit (entries, total size, compression ratio, unsafe path, nesting)
	// or has no usable Markdown file.
	ErrArchiveRejected = failure.Unprocessable("archive_rejected", "the archive was rejected")
	// ErrOCRNotConfigured: an image, or a PDF without a text layer, needs OCR
	// and no engine is configured. Details["pages"] lists scanned PDF pages.
	ErrOCRNotConfigured = failure.Unprocessable("ocr_not_configured", "OCR is required but no OCR engine is configured")
	// ErrOCRFailed: the OCR service failed or answered something unusable.
	// Details carry "engine" and, for HTTP failures, "status".
	ErrOCRFailed = failure.New(failure.KindUnavailable, "ocr_failed", "the OCR service failed")
)

// coded returns a new error with the sentinel's kind and code.
func coded(sentinel *failure.Error, format string, args ...any) *failure.Error {
	return failure.New(sentinel.Kind, sentinel.Code, format, args...)
}
