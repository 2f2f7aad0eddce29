package docparse

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// OCRHealth answers GET /api/system/ocr/health as the original's
// check_all_ocr_health: every known engine by id, each {status, message,
// details}. The configured engine (engine, at baseURL) is probed with a GET
// of its base URL (3 s): any answer below 500 is "healthy", else or on a
// connection error "unhealthy"; the engines this deployment does not
// configure are "unavailable". baseURL comes from the operator's
// environment (YUXI_OCR_BASE_URL), not from users, so hc needs no SSRF guard.
func OCRHealth(ctx context.Context, hc *http.Client, engine, baseURL string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, id := range KnownOCREngines() {
		out[id] = map[string]any{"status": "unavailable", "message": "not configured in this deployment", "details": map[string]any{}}
	}
	if engine == "" || engine == EngineDisable {
		return out
	}
	target := baseURL
	if target == "" && (engine == EnginePaddleOCRVL || engine == EnginePPOCRv6) {
		target = DefaultPaddleOCRJobsURL
	}
	res := map[string]any{"details": map[string]any{"url": target}}
	out[engine] = res
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		res["status"], res["message"] = "error", fmt.Sprintf("invalid OCR address: %v", err)
		return out
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		res["status"], res["message"] = "unhealthy", fmt.Sprintf("cannot reach the OCR service: %v", err)
		return out
	}
	resp.Body.Close()
	res["details"].(map[string]any)["http_status"] = resp.StatusCode
	res["details"].(map[string]any)["latency_ms"] = time.Since(start).Milliseconds()
	if resp.StatusCode >= 500 {
		res["status"], res["message"] = "unhealthy", fmt.Sprintf("the OCR service answered %d", resp.StatusCode)
		return out
	}
	res["status"], res["message"] = "healthy", "OCR service reachable"
	return out
}
