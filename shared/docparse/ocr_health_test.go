package docparse_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/docparse"
)

func TestOCRHealth(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) }))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	ctx := context.Background()
	h := docparse.OCRHealth(ctx, nil, docparse.EngineMinerU, up.URL)
	if h[docparse.EngineMinerU]["status"] != "healthy" || h[docparse.EnginePPStructureV3]["status"] != "unavailable" || len(h) != len(docparse.KnownOCREngines()) {
		t.Fatalf("up: %v", h)
	}
	if h := docparse.OCRHealth(ctx, nil, docparse.EngineMinerU, down.URL); h[docparse.EngineMinerU]["status"] != "unhealthy" {
		t.Fatalf("5xx: %v", h)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if h := docparse.OCRHealth(ctx, nil, docparse.EnginePPStructureV3, closed.URL); h[docparse.EnginePPStructureV3]["status"] != "unhealthy" {
		t.Fatalf("unreachable: %v", h)
	}
	for id, v := range docparse.OCRHealth(ctx, nil, "", "") {
		if v["status"] != "unavailable" {
			t.Fatalf("no OCR configured: %s %v", id, v)
		}
	}
}
