package docparse_test

import (
	"errors"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestImagesNeedOCR(t *testing.T) {
	t.Parallel()
	p := docparse.New(nil, docparse.Options{})
	for name, data := range map[string][]byte{
		"scan.png":  pngBytes("x"),
		"photo.jpg": jpegBytes("x"),
		"fax.tiff":  []byte("MM\x00*\x00\x00\x00\x08"),
	} {
		_, err := parse(t, p, name, data)
		wantCode(t, err, docparse.ErrOCRNotConfigured, name, "is an image", "OCR engine", "Settings → OCR")
	}
}

func TestImageOCRSuccess(t *testing.T) {
	t.Parallel()
	ocr := &fakeOCR{markdown: "  Invoice total: 123.45 \n"}
	res := mustParse(t, docparse.New(nil, docparse.Options{OCR: ocr, OCREngine: docparse.EnginePPOCRv6}), "receipt.jpg", pngBytes("x"))
	wantEqual(t, res.Markdown, "Invoice total: 123.45")
	if res.Format != "png" { // the content, not the name, decides
		t.Errorf("Format = %q, want png", res.Format)
	}
	if ocr.calls.Load() != 1 {
		t.Errorf("OCR calls = %d", ocr.calls.Load())
	}
}

func TestImageOCRFailure(t *testing.T) {
	t.Parallel()
	plain := &fakeOCR{err: errors.New("connection reset")}
	_, err := parse(t, docparse.New(nil, docparse.Options{OCR: plain, OCREngine: "mineru_ocr"}), "scan.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "scan.png", "mineru_ocr", "connection reset")

	// Coded errors from the engine pass through unchanged.
	coded := &fakeOCR{err: docparse.ErrOCRFailed.With(map[string]any{"status": 502})}
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: coded}), "scan.png", pngBytes("x"))
	fe := wantCode(t, err, docparse.ErrOCRFailed)
	if fe.Details["status"] != 502 {
		t.Errorf("details = %v", fe.Details)
	}

	empty := &fakeOCR{markdown: " \n"}
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: empty}), "blank.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrEmpty, "blank.png")
}
