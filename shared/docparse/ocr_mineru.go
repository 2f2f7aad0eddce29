package docparse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"path"
	"slices"
	"strings"
)

// MinerU calls a self-hosted mineru-api (the project's mineru-api service,
// port 30001): POST {BaseURL}/file_parse, multipart.
//
// The spec only names the endpoint. The form fields follow the original's
// parser (knowledge/parser/mineru.py) and MinerU's FastAPI signature
// (mineru/cli/fast_api.py): "files" holds the document; lang_list, backend,
// parse_method, formula_enable, table_enable, return_md, return_images,
// start_page_id and end_page_id configure the run. Where the original asked
// for a ZIP (response_format_zip=true) this client asks for JSON, which
// MinerU answers as
//
//	{"backend": "…", "version": "…",
//	 "results": {"<file stem>": {"md_content": "…",
//	                             "images": {"x.jpg": "data:image/jpeg;base64,…"}}}}
//
// with the Markdown linking figures as images/x.jpg.
type MinerU struct {
	BaseURL string
	Token   string // optional bearer token
	HTTP    *http.Client
	// Backend defaults to the original's "hybrid-auto-engine"; older MinerU
	// releases want "pipeline".
	Backend string
	// Lang defaults to "ch" (MinerU's OCR language list; ch covers English).
	Lang string
}

// Recognize implements OCR.
func (m *MinerU) Recognize(ctx context.Context, filename string, data []byte) (string, error) {
	md, _, err := m.RecognizeImages(ctx, filename, data)
	return md, err
}

// RecognizeImages implements ImageOCR.
func (m *MinerU) RecognizeImages(ctx context.Context, filename string, data []byte) (string, []Image, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, err := w.CreateFormFile("files", baseName(filename))
	if err != nil {
		return "", nil, err
	}
	if _, err := fw.Write(data); err != nil {
		return "", nil, err
	}
	backend, lang := m.Backend, m.Lang
	if backend == "" {
		backend = "hybrid-auto-engine"
	}
	if lang == "" {
		lang = "ch"
	}
	for _, kv := range [][2]string{
		{"lang_list", lang},
		{"backend", backend},
		{"parse_method", "auto"},
		{"formula_enable", "true"},
		{"table_enable", "true"},
		{"return_md", "true"},
		{"return_images", "true"},
		{"response_format_zip", "false"},
		{"start_page_id", "0"},
		{"end_page_id", "99999"},
	} {
		if err := w.WriteField(kv[0], kv[1]); err != nil {
			return "", nil, err
		}
	}
	if err := w.Close(); err != nil {
		return "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.BaseURL+"/file_parse", &body)
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	bearer(req, m.Token)
	raw, err := ocrCall(ctx, m.HTTP, EngineMinerU, req)
	if err != nil {
		return "", nil, err
	}
	var out struct {
		Error   string `json:"error"`
		Results map[string]struct {
			MDContent *string           `json:"md_content"`
			Images    map[string]string `json:"images"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", nil, ocrFailed(EngineMinerU, http.StatusOK, "answer is not the expected JSON: %v: %s", err, excerpt(raw))
	}
	if out.Error != "" {
		return "", nil, ocrFailed(EngineMinerU, http.StatusOK, "%s", out.Error)
	}
	keys := make([]string, 0, len(out.Results))
	for k := range out.Results {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	var images []Image
	for _, k := range keys {
		r := out.Results[k]
		if r.MDContent != nil && strings.TrimSpace(*r.MDContent) != "" {
			parts = append(parts, strings.TrimSpace(*r.MDContent))
		}
		names := make([]string, 0, len(r.Images))
		for n := range r.Images {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			ct, data, ok := decodeDataURI(r.Images[n])
			if !ok {
				continue
			}
			images = append(images, Image{Name: "images/" + path.Base(n), ContentType: ct, Data: data})
		}
	}
	if len(parts) == 0 {
		return "", nil, ocrFailed(EngineMinerU, http.StatusOK, "MinerU returned no Markdown for %s", baseName(filename))
	}
	return strings.Join(parts, "\n\n"), images, nil
}

// decodeDataURI decodes "data:<type>;base64,<payload>", or bare base64 (as
// PaddleX sends) with a sniffed type.
func decodeDataURI(s string) (contentType string, data []byte, ok bool) {
	payload := s
	if rest, found := strings.CutPrefix(s, "data:"); found {
		meta, p, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(meta, ";base64") {
			return "", nil, false
		}
		contentType, payload = strings.TrimSuffix(meta, ";base64"), p
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return "", nil, false
	}
	if contentType == "" {
		contentType = imageContentType("", data)
	}
	return contentType, data, true
}
