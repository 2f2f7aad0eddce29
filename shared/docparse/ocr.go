package docparse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// OCR recognises a scanned PDF or an image and returns Markdown.
// Implementations make one attempt and never retry; failures are ocr_failed.
type OCR interface {
	Recognize(ctx context.Context, filename string, data []byte) (markdown string, err error)
}

// ImageOCR is implemented by engines that also return the figures they cut
// out of the page; the Markdown links to them by Image.Name. Parse prefers it
// over Recognize.
type ImageOCR interface {
	RecognizeImages(ctx context.Context, filename string, data []byte) (markdown string, images []Image, err error)
}

// OCR engine ids, as the original stores them (parser/registry.py).
const (
	EngineRapidOCR       = "rapid_ocr"
	EngineMinerU         = "mineru_ocr"
	EngineMinerUOfficial = "mineru_official"
	EnginePPStructureV3  = "pp_structure_v3_ocr"
	EngineDeepSeekOCR    = "deepseek_ocr"
	EnginePaddleOCRVL    = "paddleocr_vl_1_6"
	EnginePPOCRv6        = "paddleocr_pp_ocrv6"
	// EngineDisable is the "no OCR" choice, not an engine.
	EngineDisable = "disable"
)

// DefaultPaddleOCRJobsURL is the Baidu AI Studio jobs endpoint the original
// uses when PADDLEOCR_API_URL is unset.
const DefaultPaddleOCRJobsURL = "https://paddleocr.aistudio-app.com/api/v2/ocr/jobs"

// KnownOCREngines lists every engine id of the original, sorted.
func KnownOCREngines() []string {
	return []string{EngineDeepSeekOCR, EngineMinerU, EngineMinerUOfficial, EnginePaddleOCRVL, EnginePPOCRv6, EnginePPStructureV3, EngineRapidOCR}
}

func implementedOCREngines() []string {
	return []string{EngineMinerU, EnginePaddleOCRVL, EnginePPOCRv6, EnginePPStructureV3}
}

// NewOCR returns the HTTP client of an OCR engine.
//
//   - mineru_ocr: a self-hosted mineru-api; baseURL is MINERU_API_URI
//     (e.g. http://mineru-api:30001). token, when set, is sent as a bearer
//     token (for a gateway in front of it).
//   - pp_structure_v3_ocr: a PaddleX serving endpoint; baseURL is PADDLEX_URI
//     (e.g. http://paddlex:8080). token as for MinerU.
//   - paddleocr_vl_1_6, paddleocr_pp_ocrv6: the Baidu AI Studio jobs API;
//     baseURL is PADDLEOCR_API_URL (empty: DefaultPaddleOCRJobsURL) and token
//     the required PADDLEOCR_API_TOKEN.
//
// hc nil means a fresh http.Client without a timeout: bound calls with the
// context (MinerU may take the original's MINERU_TIMEOUT of 30 minutes).
// rapid_ocr (an in-process Python library), mineru_official and deepseek_ocr
// are known but not implemented here; unknown ids are an error that lists
// the known ones.
func NewOCR(engine, baseURL, token string, hc *http.Client) (OCR, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	needBase := func(env string) (string, error) {
		if baseURL == "" {
			return "", fmt.Errorf("ocr engine %s needs a base URL (%s)", engine, env)
		}
		return checkBaseURL(engine, baseURL)
	}
	switch engine {
	case EngineMinerU:
		base, err := needBase("MINERU_API_URI")
		if err != nil {
			return nil, err
		}
		return &MinerU{BaseURL: base, Token: token, HTTP: hc}, nil
	case EnginePPStructureV3:
		base, err := needBase("PADDLEX_URI")
		if err != nil {
			return nil, err
		}
		return &PaddleX{BaseURL: base, Token: token, HTTP: hc}, nil
	case EnginePaddleOCRVL, EnginePPOCRv6:
		if token == "" {
			return nil, fmt.Errorf("ocr engine %s needs an access token (PADDLEOCR_API_TOKEN)", engine)
		}
		if baseURL == "" {
			baseURL = DefaultPaddleOCRJobsURL
		}
		base, err := checkBaseURL(engine, baseURL)
		if err != nil {
			return nil, err
		}
		return NewPaddleOCRJobs(engine, base, token, hc), nil
	case EngineRapidOCR, EngineMinerUOfficial, EngineDeepSeekOCR:
		return nil, fmt.Errorf("ocr engine %s is not available in this build; available: %s", engine, strings.Join(implementedOCREngines(), ", "))
	case EngineDisable, "":
		return nil, fmt.Errorf("ocr engine %q means no OCR: leave Options.OCR nil", engine)
	}
	return nil, fmt.Errorf("unknown ocr engine %q; known engines: %s", engine, strings.Join(KnownOCREngines(), ", "))
}

func checkBaseURL(engine, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("ocr engine %s: base URL %q is not an http(s) URL", engine, raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// maxOCRResponse bounds what is read from an OCR service (MinerU inlines
// every figure as base64).
const maxOCRResponse = 512 << 20

// ocrCall performs one request and returns the body of a 2xx answer; other
// statuses become ocr_failed with the status and a body excerpt.
func ocrCall(ctx context.Context, hc *http.Client, engine string, req *http.Request) ([]byte, error) {
	resp, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ocrFailed(engine, 0, "cannot reach %s: %v", req.URL.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOCRResponse+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ocrFailed(engine, resp.StatusCode, "reading the answer: %v", err)
	}
	if len(body) > maxOCRResponse {
		return nil, ocrFailed(engine, resp.StatusCode, "answer larger than %s", humanBytes(maxOCRResponse))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, ocrFailed(engine, resp.StatusCode, "HTTP %d: %s", resp.StatusCode, excerpt(body))
	}
	return body, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func ocrFailed(engine string, status int, format string, args ...any) error {
	e := coded(ErrOCRFailed, "OCR engine %s: %s", engine, fmt.Sprintf(format, args...))
	details := map[string]any{"engine": engine}
	if status != 0 {
		details["status"] = status
	}
	return e.With(details)
}

// excerpt shortens a response body for an error message.
func excerpt(b []byte) string {
	const limit = 300
	s := strings.Join(strings.Fields(string(bytes.ToValidUTF8(b, []byte("?")))), " ")
	if s == "" {
		return "(empty body)"
	}
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func bearer(req *http.Request, token string) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}
