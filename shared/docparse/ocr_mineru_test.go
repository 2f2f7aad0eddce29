package docparse_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// fakeMinerU speaks mineru-api's /file_parse: multipart in, JSON out.
func fakeMinerU(t *testing.T, status int, answer func(stem string) any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/file_parse" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for field, want := range map[string]string{"return_md": "true", "return_images": "true", "response_format_zip": "false", "backend": "hybrid-auto-engine", "lang_list": "ch"} {
			if got := r.FormValue(field); got != want {
				http.Error(w, field+"="+got, http.StatusUnprocessableEntity)
				return
			}
		}
		f, fh, err := r.FormFile("files")
		if err != nil {
			http.Error(w, "no files part", http.StatusUnprocessableEntity)
			return
		}
		data, _ := io.ReadAll(f)
		if !bytes.HasPrefix(data, []byte("%PDF-")) && !bytes.HasPrefix(data, []byte("\x89PNG")) {
			http.Error(w, "unexpected upload", http.StatusUnprocessableEntity)
			return
		}
		if r.Header.Get("Authorization") != "" && r.Header.Get("Authorization") != "Bearer gate-token" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(answer(strings.TrimSuffix(fh.Filename, ".pdf")))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMinerUScannedPDF(t *testing.T) {
	t.Parallel()
	fig := jpegBytes("figure")
	srv := fakeMinerU(t, http.StatusOK, func(stem string) any {
		return map[string]any{"backend": "hybrid-auto-engine", "version": "2.6.0", "results": map[string]any{
			stem: map[string]any{
				"md_content": "# Scanned contract\n\n![](images/abc.jpg)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
				"images":     map[string]string{"abc.jpg": "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(fig)},
			},
		}}
	})
	ocr, err := docparse.NewOCR("mineru_ocr", srv.URL, "gate-token", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{""}, ScannedPages: []int{1}}}, docparse.Options{OCR: ocr, OCREngine: "mineru_ocr"})
	res := mustParse(t, p, "contract.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "# Scanned contract\n\n![](images/abc.jpg)\n\n| a | b |\n|---|---|\n| 1 | 2 |")
	if len(res.Images) != 1 || res.Images[0].Name != "images/abc.jpg" || res.Images[0].ContentType != "image/jpeg" || !bytes.Equal(res.Images[0].Data, fig) {
		t.Fatalf("images = %+v", res.Images)
	}
	if res.Pages != 1 {
		t.Errorf("pages = %d", res.Pages)
	}
}

func TestMinerUImage(t *testing.T) {
	t.Parallel()
	srv := fakeMinerU(t, http.StatusOK, func(stem string) any {
		return map[string]any{"results": map[string]any{stem: map[string]any{"md_content": "Hello from a PNG"}}}
	})
	ocr, _ := docparse.NewOCR("mineru_ocr", srv.URL, "", srv.Client())
	res := mustParse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "shot.png", pngBytes("x"))
	wantEqual(t, res.Markdown, "Hello from a PNG")
}

func TestMinerUFailures(t *testing.T) {
	t.Parallel()
	oom := fakeMinerU(t, http.StatusInternalServerError, func(string) any {
		return map[string]string{"error": "Failed to process file: CUDA out of memory. " + strings.Repeat("trace ", 200)}
	})
	ocr, _ := docparse.NewOCR("mineru_ocr", oom.URL, "", oom.Client())
	_, err := parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "scan.png", pngBytes("x"))
	fe := wantCode(t, err, docparse.ErrOCRFailed, "mineru_ocr", "HTTP 500", "CUDA out of memory", "…")
	if fe.Details["status"] != 500 || fe.Details["engine"] != "mineru_ocr" {
		t.Errorf("details = %v", fe.Details)
	}
	if len(fe.Message) > 600 {
		t.Errorf("message not shortened: %d bytes", len(fe.Message))
	}

	empty := fakeMinerU(t, http.StatusOK, func(stem string) any {
		return map[string]any{"results": map[string]any{stem: map[string]any{"md_content": ""}}}
	})
	ocr, _ = docparse.NewOCR("mineru_ocr", empty.URL, "", empty.Client())
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "scan.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "no Markdown")

	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<html>proxy login</html>")
	}))
	defer html.Close()
	ocr, _ = docparse.NewOCR("mineru_ocr", html.URL, "", html.Client())
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "scan.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "not the expected JSON", "proxy login")

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	ocr, _ = docparse.NewOCR("mineru_ocr", gone.URL, "", nil)
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "scan.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "cannot reach")
}
