package docparse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// PaddleX calls a PaddleX serving deployment of the PP-StructureV3 pipeline
// (engine pp_structure_v3_ocr, the project's paddlex service on port 8080):
// POST {BaseURL}/layout-parsing with JSON
//
//	{"file": "<base64>", "fileType": 0 (PDF) | 1 (image),
//	 "useTableRecognition": true, "useFormulaRecognition": true,
//	 "useSealRecognition": false}
//
// as the original (knowledge/parser/pp_structure_v3.py) sends it. The answer
// follows the PaddleX serving convention:
//
//	{"logId": "…", "errorCode": 0, "errorMsg": "Success",
//	 "result": {"layoutParsingResults": [
//	   {"markdown": {"text": "…", "images": {"imgs/x.jpg": "<base64>"}}}]}}
//
// with one layout result per page, joined here by blank lines. The original
// first polls GET /health; this client does not spend that round trip.
type PaddleX struct {
	BaseURL string
	Token   string // optional bearer token
	HTTP    *http.Client
}

// Recognize implements OCR.
func (p *PaddleX) Recognize(ctx context.Context, filename string, data []byte) (string, error) {
	md, _, err := p.RecognizeImages(ctx, filename, data)
	return md, err
}

// RecognizeImages implements ImageOCR.
func (p *PaddleX) RecognizeImages(ctx context.Context, filename string, data []byte) (string, []Image, error) {
	fileType := 1
	if isPDF(data) {
		fileType = 0
	}
	payload, err := json.Marshal(map[string]any{
		"file":                  base64.StdEncoding.EncodeToString(data),
		"fileType":              fileType,
		"useTableRecognition":   true,
		"useFormulaRecognition": true,
		"useSealRecognition":    false,
	})
	if err != nil {
		return "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.BaseURL+"/layout-parsing", bytes.NewReader(payload))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	bearer(req, p.Token)
	raw, err := ocrCall(ctx, p.HTTP, EnginePPStructureV3, req)
	if err != nil {
		return "", nil, err
	}
	var out struct {
		ErrorCode *int   `json:"errorCode"`
		ErrorMsg  string `json:"errorMsg"`
		Result    struct {
			LayoutParsingResults []paddleLayoutResult `json:"layoutParsingResults"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", nil, ocrFailed(EnginePPStructureV3, http.StatusOK, "answer is not the expected JSON: %v: %s", err, excerpt(raw))
	}
	if out.ErrorCode != nil && *out.ErrorCode != 0 {
		return "", nil, ocrFailed(EnginePPStructureV3, http.StatusOK, "errorCode %d: %s", *out.ErrorCode, out.ErrorMsg)
	}
	md, images, err := joinLayoutResults(out.Result.LayoutParsingResults, func(name, v string) (string, []byte, error) {
		ct, data, ok := decodeDataURI(v)
		if !ok {
			return "", nil, ocrFailed(EnginePPStructureV3, http.StatusOK, "image %s in the answer is not base64", name)
		}
		return ct, data, nil
	})
	if err != nil {
		return "", nil, err
	}
	if md == "" {
		return "", nil, ocrFailed(EnginePPStructureV3, http.StatusOK, "no Markdown in the answer for %s", baseName(filename))
	}
	return md, images, nil
}

// paddleLayoutResult is one page of a layout-parsing result (PaddleX
// serving and the AI Studio jobs API share it).
type paddleLayoutResult struct {
	Markdown struct {
		Text   *string           `json:"text"`
		Images map[string]string `json:"images"`
	} `json:"markdown"`
}

// joinLayoutResults joins page Markdown and resolves each page's images
// with fetch (base64 for PaddleX, URLs for the jobs API).
func joinLayoutResults(pages []paddleLayoutResult, fetch func(name, value string) (string, []byte, error)) (string, []Image, error) {
	var parts []string
	var images []Image
	for _, pg := range pages {
		if pg.Markdown.Text != nil && strings.TrimSpace(*pg.Markdown.Text) != "" {
			parts = append(parts, strings.TrimSpace(*pg.Markdown.Text))
		}
		names := make([]string, 0, len(pg.Markdown.Images))
		for n := range pg.Markdown.Images {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			ct, data, err := fetch(n, pg.Markdown.Images[n])
			if err != nil {
				return "", nil, err
			}
			images = append(images, Image{Name: n, ContentType: ct, Data: data})
		}
	}
	return strings.Join(parts, "\n\n"), images, nil
}
