package docparse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// PaddleOCRJobs calls the Baidu AI Studio PaddleOCR jobs API (engines
// paddleocr_vl_1_6 → model "PaddleOCR-VL-1.6", layout Markdown; and
// paddleocr_pp_ocrv6 → model "PP-OCRv6", plain text lines), following the
// original's parser (knowledge/parser/paddleocr_api.py):
//
//  1. POST {URL} multipart: model, optionalPayload (JSON), file; header
//     "Authorization: bearer <token>" → {"code": 0, "data": {"jobId": "…"}}
//  2. GET {URL}/{jobId} until data.state is "done" (→ data.resultUrl.jsonUrl)
//     or "failed" (→ data.errorMsg); "pending"/"running" wait PollInterval.
//  3. GET jsonUrl (a presigned URL: no token is sent) → JSON lines, each
//     {"result": {"layoutParsingResults": [{"markdown": {"text", "images":
//     {path: url}}}]}} for VL, or {"result": {"ocrResults": [{"prunedResult":
//     {"rec_texts": […]}}]}} for PP-OCRv6. VL figures are downloaded from
//     their URLs and returned as images named by their Markdown path.
type PaddleOCRJobs struct {
	Engine       string
	Model        string
	URL          string
	Token        string
	HTTP         *http.Client
	PollInterval time.Duration // default 5s
	MaxWait      time.Duration // default 10 minutes
}

// NewPaddleOCRJobs returns the client for engine paddleocr_vl_1_6 or
// paddleocr_pp_ocrv6.
func NewPaddleOCRJobs(engine, url, token string, hc *http.Client) *PaddleOCRJobs {
	model := "PP-OCRv6"
	if engine == EnginePaddleOCRVL {
		model = "PaddleOCR-VL-1.6"
	}
	return &PaddleOCRJobs{Engine: engine, Model: model, URL: url, Token: token, HTTP: hc, PollInterval: 5 * time.Second, MaxWait: 10 * time.Minute}
}

// optionalPayload is the model's default optionalPayload in the original.
func (j *PaddleOCRJobs) optionalPayload() map[string]bool {
	if j.Engine == EnginePaddleOCRVL {
		return map[string]bool{"useDocOrientationClassify": false, "useDocUnwarping": false, "useChartRecognition": false}
	}
	return map[string]bool{"useDocOrientationClassify": false, "useDocUnwarping": false, "useTextlineOrientation": false}
}

// Recognize implements OCR.
func (j *PaddleOCRJobs) Recognize(ctx context.Context, filename string, data []byte) (string, error) {
	md, _, err := j.RecognizeImages(ctx, filename, data)
	return md, err
}

// RecognizeImages implements ImageOCR.
func (j *PaddleOCRJobs) RecognizeImages(ctx context.Context, filename string, data []byte) (string, []Image, error) {
	jobID, err := j.submit(ctx, filename, data)
	if err != nil {
		return "", nil, err
	}
	jsonURL, err := j.wait(ctx, jobID)
	if err != nil {
		return "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jsonURL, nil)
	if err != nil {
		return "", nil, ocrFailed(j.Engine, 0, "bad result URL %q: %v", jsonURL, err)
	}
	raw, err := ocrCall(ctx, j.HTTP, j.Engine, req)
	if err != nil {
		return "", nil, err
	}
	md, images, err := j.extract(ctx, raw)
	if err != nil {
		return "", nil, err
	}
	if md == "" {
		return "", nil, ocrFailed(j.Engine, http.StatusOK, "the job result for %s holds no text", baseName(filename))
	}
	return md, images, nil
}

func (j *PaddleOCRJobs) auth(req *http.Request) {
	req.Header.Set("Authorization", "bearer "+j.Token) // the original's casing
}

func (j *PaddleOCRJobs) submit(ctx context.Context, filename string, data []byte) (string, error) {
	opt, err := json.Marshal(j.optionalPayload())
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if err := w.WriteField("model", j.Model); err != nil {
		return "", err
	}
	if err := w.WriteField("optionalPayload", string(opt)); err != nil {
		return "", err
	}
	fw, err := w.CreateFormFile("file", baseName(filename))
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(data); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	j.auth(req)
	raw, err := ocrCall(ctx, j.HTTP, j.Engine, req)
	if err != nil {
		return "", err
	}
	var out struct {
		Code *int   `json:"code"`
		Msg  string `json:"msg"`
		Data struct {
			JobID json.RawMessage `json:"jobId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", ocrFailed(j.Engine, http.StatusOK, "submit answer is not the expected JSON: %s", excerpt(raw))
	}
	if out.Code != nil && *out.Code != 0 {
		return "", ocrFailed(j.Engine, http.StatusOK, "submit failed with code %d: %s", *out.Code, out.Msg)
	}
	id := strings.Trim(string(out.Data.JobID), `"`)
	if id == "" || id == "null" {
		return "", ocrFailed(j.Engine, http.StatusOK, "submit answer has no jobId: %s", excerpt(raw))
	}
	return id, nil
}

// wait polls the job until it is done and returns its JSONL result URL.
func (j *PaddleOCRJobs) wait(ctx context.Context, jobID string) (string, error) {
	interval, maxWait := j.PollInterval, j.MaxWait
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if maxWait <= 0 {
		maxWait = 10 * time.Minute
	}
	deadline := time.Now().Add(maxWait)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.URL+"/"+jobID, nil)
		if err != nil {
			return "", err
		}
		j.auth(req)
		raw, err := ocrCall(ctx, j.HTTP, j.Engine, req)
		if err != nil {
			return "", err
		}
		var out struct {
			Data struct {
				State     string `json:"state"`
				ErrorMsg  string `json:"errorMsg"`
				ResultURL struct {
					JSONURL string `json:"jsonUrl"`
				} `json:"resultUrl"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return "", ocrFailed(j.Engine, http.StatusOK, "job status is not the expected JSON: %s", excerpt(raw))
		}
		switch out.Data.State {
		case "done":
			if u := strings.TrimSpace(out.Data.ResultURL.JSONURL); u != "" {
				return u, nil
			}
			return "", ocrFailed(j.Engine, http.StatusOK, "job %s is done but has no jsonUrl", jobID)
		case "failed":
			msg := out.Data.ErrorMsg
			if msg == "" {
				msg = "unknown error"
			}
			return "", ocrFailed(j.Engine, http.StatusOK, "job %s failed: %s", jobID, msg)
		case "pending", "running":
		default:
			return "", ocrFailed(j.Engine, http.StatusOK, "job %s is in unexpected state %q", jobID, out.Data.State)
		}
		if time.Now().Add(interval).After(deadline) {
			return "", ocrFailed(j.Engine, 0, "job %s not done after %s", jobID, maxWait)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

type paddleJobRow struct {
	Result struct {
		LayoutParsingResults []paddleLayoutResult `json:"layoutParsingResults"`
		OCRResults           []struct {
			PrunedResult struct {
				RecTexts []any `json:"rec_texts"`
			} `json:"prunedResult"`
		} `json:"ocrResults"`
	} `json:"result"`
}

// extract reads the JSON lines of a finished job.
func (j *PaddleOCRJobs) extract(ctx context.Context, raw []byte) (string, []Image, error) {
	var rows []paddleJobRow
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), maxOCRResponse)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var row paddleJobRow
		if err := json.Unmarshal(line, &row); err != nil {
			return "", nil, ocrFailed(j.Engine, http.StatusOK, "result line is not JSON: %s", excerpt(line))
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return "", nil, ocrFailed(j.Engine, http.StatusOK, "reading the result: %v", err)
	}
	if j.Engine != EnginePaddleOCRVL {
		var lines []string
		for _, row := range rows {
			for _, r := range row.Result.OCRResults {
				for _, t := range r.PrunedResult.RecTexts {
					if s, ok := t.(string); ok && strings.TrimSpace(s) != "" {
						lines = append(lines, strings.TrimSpace(s))
					}
				}
			}
		}
		return strings.Join(lines, "\n"), nil, nil
	}
	var pages []paddleLayoutResult
	for _, row := range rows {
		pages = append(pages, row.Result.LayoutParsingResults...)
	}
	return joinLayoutResults(pages, func(name, u string) (string, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", nil, ocrFailed(j.Engine, 0, "bad image URL for %s: %v", name, err)
		}
		data, err := ocrCall(ctx, j.HTTP, j.Engine, req)
		if err != nil {
			return "", nil, fmt.Errorf("download image %s: %w", name, err)
		}
		return imageContentType(name, data), data, nil
	})
}
