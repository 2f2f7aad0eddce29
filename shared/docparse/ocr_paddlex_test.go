package docparse_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

type layoutRequest struct {
	File                  string `json:"file"`
	FileType              *int   `json:"fileType"`
	UseTableRecognition   bool   `json:"useTableRecognition"`
	UseFormulaRecognition bool   `json:"useFormulaRecognition"`
}

// fakePaddleX speaks PaddleX serving's /layout-parsing and records the
// fileType it was sent.
func fakePaddleX(t *testing.T, gotType *atomic.Int32, answer func(req layoutRequest) (int, any)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/layout-parsing" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request line", http.StatusNotFound)
			return
		}
		var req layoutRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.FileType == nil || !req.UseTableRecognition {
			http.Error(w, "bad body", http.StatusUnprocessableEntity)
			return
		}
		if _, err := base64.StdEncoding.DecodeString(req.File); err != nil {
			http.Error(w, "file is not base64", http.StatusUnprocessableEntity)
			return
		}
		gotType.Store(int32(*req.FileType))
		status, body := answer(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestPaddleXLayoutParsing(t *testing.T) {
	t.Parallel()
	fig := pngBytes("table-crop")
	var fileType atomic.Int32
	srv := fakePaddleX(t, &fileType, func(req layoutRequest) (int, any) {
		return http.StatusOK, map[string]any{"logId": "l1", "errorCode": 0, "errorMsg": "Success", "result": map[string]any{
			"layoutParsingResults": []any{
				map[string]any{"markdown": map[string]any{"text": "## Page one\n\n<img src=\"imgs/t.png\">", "images": map[string]string{"imgs/t.png": base64.StdEncoding.EncodeToString(fig)}}},
				map[string]any{"markdown": map[string]any{"text": "Page two", "images": map[string]string{}}},
			},
		}}
	})
	ocr, err := docparse.NewOCR("pp_structure_v3_ocr", srv.URL, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{"", ""}, ScannedPages: []int{1, 2}}}, docparse.Options{OCR: ocr})
	res := mustParse(t, p, "scan.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "## Page one\n\n<img src=\"imgs/t.png\">\n\nPage two")
	if fileType.Load() != 0 {
		t.Errorf("fileType for a PDF = %d, want 0", fileType.Load())
	}
	if len(res.Images) != 1 || res.Images[0].Name != "imgs/t.png" || !bytes.Equal(res.Images[0].Data, fig) || res.Images[0].ContentType != "image/png" {
		t.Fatalf("images = %+v", res.Images)
	}

	res = mustParse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "photo.jpg", jpegBytes("x"))
	if fileType.Load() != 1 {
		t.Errorf("fileType for an image = %d, want 1", fileType.Load())
	}
	wantContains(t, res.Markdown, "Page two")
}

func TestPaddleXFailures(t *testing.T) {
	t.Parallel()
	var fileType atomic.Int32
	apiErr := fakePaddleX(t, &fileType, func(layoutRequest) (int, any) {
		return http.StatusOK, map[string]any{"logId": "l2", "errorCode": 1001, "errorMsg": "Unsupported file"}
	})
	ocr, _ := docparse.NewOCR("pp_structure_v3_ocr", apiErr.URL, "", apiErr.Client())
	_, err := parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "x.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "pp_structure_v3_ocr", "errorCode 1001", "Unsupported file")

	busy := fakePaddleX(t, &fileType, func(layoutRequest) (int, any) {
		return http.StatusServiceUnavailable, map[string]any{"logId": "l3", "errorCode": 503, "errorMsg": "Service Unavailable"}
	})
	ocr, _ = docparse.NewOCR("pp_structure_v3_ocr", busy.URL, "", busy.Client())
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "x.png", pngBytes("x"))
	fe := wantCode(t, err, docparse.ErrOCRFailed, "HTTP 503", "Service Unavailable")
	if fe.Details["status"] != 503 {
		t.Errorf("details = %v", fe.Details)
	}

	noText := fakePaddleX(t, &fileType, func(layoutRequest) (int, any) {
		return http.StatusOK, map[string]any{"errorCode": 0, "result": map[string]any{"layoutParsingResults": []any{}}}
	})
	ocr, _ = docparse.NewOCR("pp_structure_v3_ocr", noText.URL, "", noText.Client())
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "x.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "no Markdown")
}
