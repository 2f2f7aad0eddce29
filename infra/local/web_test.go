package local

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebHandlerServesTheUIWithoutShadowingTheAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "assets"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "index.html"), []byte("<!doctype html><title>Yuxi</title>"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "assets", "index-abc123.js"), []byte("console.log(1)"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "favicon.svg"), []byte("<svg/>"), 0o644))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"route_not_found"}}`))
	})
	h := WebHandler(dir, api)
	cases := []struct {
		method, path string
		status       int
		cache, body  string
	}{
		{"GET", "/", 200, "no-cache", "<!doctype html>"},
		{"GET", "/index.html", 200, "no-cache", "<!doctype html>"},
		{"GET", "/chat/th_1", 200, "no-cache", "<!doctype html>"}, // SPA route
		{"GET", "/knowledge", 200, "no-cache", "<!doctype html>"},
		{"GET", "/assets/index-abc123.js", 200, "public, max-age=31536000, immutable", "console.log(1)"},
		{"GET", "/favicon.svg", 200, "no-cache", "<svg/>"},
		{"GET", "/assets/missing-123.js", 404, "no-cache", ""}, // never index.html for a missing asset
		{"GET", "/api/nope", 404, "", `"route_not_found"`},
		{"GET", "/api", 404, "", `"route_not_found"`},
		{"GET", "/v1/models/x", 404, "", `"route_not_found"`},
		{"GET", "/v1", 404, "", `"route_not_found"`},
		{"POST", "/chat", 405, "", ""},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, rec.Code, c.status)
		}
		if got := rec.Header().Get("Cache-Control"); got != c.cache {
			t.Errorf("%s %s: Cache-Control %q, want %q", c.method, c.path, got, c.cache)
		}
		if c.body != "" && !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("%s %s: body %q lacks %q", c.method, c.path, rec.Body.String(), c.body)
		}
	}
}

func TestWebHandlerWithoutABuildSaysSo(t *testing.T) {
	t.Parallel()
	h := WebHandler(t.TempDir(), http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/chat", nil))
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "make web") {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
}

func TestWebHandlerGzipsTextAssets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	js := strings.Repeat("export const a = 'yuxi';\n", 200)
	for name, body := range map[string]string{"app-1.js": js, "tiny-1.css": "a{}", "logo-1.png": js} {
		if err := os.WriteFile(filepath.Join(dir, "assets", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := WebHandler(dir, http.NotFoundHandler())
	get := func(p, enc string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", p, nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for range 2 { // the second answer comes from the cache
		rec := get("/assets/app-1.js", "gzip, deflate, br")
		if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") ||
			rec.Header().Get("Vary") != "Accept-Encoding" || rec.Body.Len() >= len(js)/4 {
			t.Fatalf("gzip js: %d %v (%d bytes)", rec.Code, rec.Header(), rec.Body.Len())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(zr); string(b) != js {
			t.Fatalf("gunzipped body differs (%d bytes)", len(b))
		}
	}
	if rec := get("/assets/app-1.js", ""); rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != js {
		t.Fatalf("without Accept-Encoding: %v", rec.Header())
	}
	if rec := get("/assets/tiny-1.css", "gzip"); rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != "a{}" {
		t.Fatalf("a file gzip would grow is sent as is: %v %q", rec.Header(), rec.Body.String())
	}
	if rec := get("/assets/logo-1.png", "gzip"); rec.Header().Get("Content-Encoding") != "" {
		t.Fatalf("an image is not gzipped: %v", rec.Header())
	}
}
