package docparse_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

// fakeJobsAPI speaks the AI Studio PaddleOCR jobs API: submit, poll (pending
// once, then finalState), and a presigned JSONL result next to image files.
type fakeJobsAPI struct {
	srv        *httptest.Server
	finalState string
	resultRows []any
	mu         sync.Mutex
	polls      int
	submitted  map[string]string
	resultAuth string
}

func newFakeJobsAPI(t *testing.T, finalState string, rows ...any) *fakeJobsAPI {
	t.Helper()
	f := &fakeJobsAPI{finalState: finalState, resultRows: rows}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/ocr/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer tok" {
			http.Error(w, `{"code":401,"msg":"bad token"}`, http.StatusUnauthorized)
			return
		}
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		file, fh, err := r.FormFile("file")
		if err != nil {
			http.Error(w, "no file", http.StatusBadRequest)
			return
		}
		if data, _ := io.ReadAll(file); len(data) == 0 {
			http.Error(w, "empty file", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.submitted = map[string]string{"model": r.FormValue("model"), "optionalPayload": r.FormValue("optionalPayload"), "filename": fh.Filename}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"code": 0, "msg": "ok", "data": map[string]any{"jobId": "job-1"}})
	})
	mux.HandleFunc("GET /api/v2/ocr/jobs/job-1", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer tok" {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.polls++
		state := f.finalState
		if f.polls == 1 {
			state = "running"
		}
		f.mu.Unlock()
		data := map[string]any{"jobId": "job-1", "state": state}
		if state == "done" {
			data["resultUrl"] = map[string]any{"jsonUrl": f.srv.URL + "/results/job-1.jsonl"}
		}
		if state == "failed" {
			data["errorMsg"] = "page count exceeds quota"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"code": 0, "data": data})
	})
	mux.HandleFunc("GET /results/job-1.jsonl", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.resultAuth = r.Header.Get("Authorization")
		f.mu.Unlock()
		for _, row := range f.resultRows {
			b, _ := json.Marshal(row)
			_, _ = w.Write(append(b, '\n'))
		}
	})
	mux.HandleFunc("GET /results/imgs/chart.jpg", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(jpegBytes("chart"))
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func jobsOCR(t *testing.T, engine string, f *fakeJobsAPI) docparse.OCR {
	t.Helper()
	ocr, err := docparse.NewOCR(engine, f.srv.URL+"/api/v2/ocr/jobs", "tok", f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ocr.(*docparse.PaddleOCRJobs).PollInterval = 5 * time.Millisecond
	return ocr
}

func TestPaddleOCRVLJob(t *testing.T) {
	t.Parallel()
	f := newFakeJobsAPI(t, "done", nil)
	f.resultRows = []any{
		map[string]any{"result": map[string]any{"layoutParsingResults": []any{
			map[string]any{"markdown": map[string]any{"text": "# Page 1\n\n![](imgs/chart.jpg)", "images": map[string]string{"imgs/chart.jpg": f.srv.URL + "/results/imgs/chart.jpg"}}},
		}}},
		map[string]any{"result": map[string]any{"layoutParsingResults": []any{
			map[string]any{"markdown": map[string]any{"text": "Page 2 text"}, "outputImages": map[string]string{"debug": "ignored"}},
		}}},
	}
	p := docparse.New(fakePDF{text: docparse.PDFText{Pages: []string{"", ""}, ScannedPages: []int{1, 2}}},
		docparse.Options{OCR: jobsOCR(t, "paddleocr_vl_1_6", f), OCREngine: "paddleocr_vl_1_6"})
	res := mustParse(t, p, "scan.pdf", pdfBytes)
	wantEqual(t, res.Markdown, "# Page 1\n\n![](imgs/chart.jpg)\n\nPage 2 text")
	if len(res.Images) != 1 || res.Images[0].Name != "imgs/chart.jpg" || res.Images[0].ContentType != "image/jpeg" {
		t.Fatalf("images = %+v", res.Images)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitted["model"] != "PaddleOCR-VL-1.6" || f.submitted["filename"] != "scan.pdf" {
		t.Errorf("submitted = %v", f.submitted)
	}
	var opt map[string]bool
	if err := json.Unmarshal([]byte(f.submitted["optionalPayload"]), &opt); err != nil || len(opt) != 3 || opt["useChartRecognition"] {
		t.Errorf("optionalPayload = %s", f.submitted["optionalPayload"])
	}
	if f.polls != 2 {
		t.Errorf("polls = %d, want 2 (running, then done)", f.polls)
	}
	if f.resultAuth != "" {
		t.Errorf("the token was sent to the presigned result URL: %q", f.resultAuth)
	}
}

func TestPaddleOCRv6Job(t *testing.T) {
	t.Parallel()
	f := newFakeJobsAPI(t, "done", map[string]any{"result": map[string]any{"ocrResults": []any{
		map[string]any{"prunedResult": map[string]any{"rec_texts": []any{"PaddleOCR API Test", "", " Invoice total: 123.45 ", 7}}},
	}}})
	res := mustParse(t, docparse.New(nil, docparse.Options{OCR: jobsOCR(t, "paddleocr_pp_ocrv6", f)}), "receipt.png", pngBytes("x"))
	wantEqual(t, res.Markdown, "PaddleOCR API Test\nInvoice total: 123.45")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.submitted["model"] != "PP-OCRv6" || !strings.Contains(f.submitted["optionalPayload"], "useTextlineOrientation") {
		t.Errorf("submitted = %v", f.submitted)
	}
}

func TestPaddleOCRJobFailures(t *testing.T) {
	t.Parallel()
	failed := newFakeJobsAPI(t, "failed")
	_, err := parse(t, docparse.New(nil, docparse.Options{OCR: jobsOCR(t, "paddleocr_pp_ocrv6", failed)}), "x.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "paddleocr_pp_ocrv6", "job job-1 failed", "page count exceeds quota")

	weird := newFakeJobsAPI(t, "exploded")
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: jobsOCR(t, "paddleocr_pp_ocrv6", weird)}), "x.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, `unexpected state "exploded"`)

	slow := newFakeJobsAPI(t, "running")
	ocr := jobsOCR(t, "paddleocr_pp_ocrv6", slow)
	ocr.(*docparse.PaddleOCRJobs).MaxWait = 30 * time.Millisecond
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: ocr}), "x.png", pngBytes("x"))
	wantCode(t, err, docparse.ErrOCRFailed, "not done after")

	denied, _ := docparse.NewOCR("paddleocr_vl_1_6", failed.srv.URL+"/api/v2/ocr/jobs", "wrong", failed.srv.Client())
	_, err = parse(t, docparse.New(nil, docparse.Options{OCR: denied}), "x.png", pngBytes("x"))
	fe := wantCode(t, err, docparse.ErrOCRFailed, "HTTP 401", "bad token")
	if fe.Details["status"] != 401 {
		t.Errorf("details = %v", fe.Details)
	}
}
