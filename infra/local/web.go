package local

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// WebHandler serves the built web UI (web/dist) at / next to api: paths
// under /api/ and /v1/ (and /v1 itself) always reach the API, so the SPA
// fallback never shadows an API route or its JSON 404. Hashed assets under
// /assets/ are immutable for a year; index.html and other files are
// revalidated on every load (no-cache), so a new build is picked up at once.
// A path with no file that looks like a page (no extension) gets index.html,
// the SPA's router shows it; a missing asset is a plain 404. Text assets
// (.js, .css, .svg, .json) go gzip-compressed to a client that accepts it,
// compressed once per file (they never change under their hashed name).
func WebHandler(dir string, api http.Handler) http.Handler {
	root := http.Dir(dir)
	files := http.FileServer(root)
	index := filepath.Join(dir, "index.html")
	var gz sync.Map // asset path → []byte (gzip), or nil when not worth it
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/v1" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") || p == "/api" {
			api.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		clean := path.Clean("/" + p)
		if clean != "/" && clean != "/index.html" {
			if f, err := root.Open(clean); err == nil {
				st, serr := f.Stat()
				f.Close()
				if serr == nil && !st.IsDir() {
					if strings.HasPrefix(clean, "/assets/") {
						w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
						if serveGzip(w, r, &gz, dir, clean) {
							return
						}
					} else {
						w.Header().Set("Cache-Control", "no-cache")
					}
					files.ServeHTTP(w, r)
					return
				}
			}
			if path.Ext(clean) != "" {
				w.Header().Set("Cache-Control", "no-cache")
				http.NotFound(w, r)
				return
			}
		}
		body, err := os.ReadFile(index)
		if err != nil {
			http.Error(w, "the web UI is not built (make web)", http.StatusNotFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}

// compressible are the asset types sent gzip-compressed.
var compressible = map[string]bool{".js": true, ".css": true, ".svg": true, ".json": true, ".map": true, ".txt": true}

// serveGzip answers an asset compressed when the client accepts gzip and
// the type is text; false leaves the answer to the file server.
func serveGzip(w http.ResponseWriter, r *http.Request, cache *sync.Map, dir, clean string) bool {
	ext := path.Ext(clean)
	if !compressible[ext] {
		return false
	}
	w.Header().Add("Vary", "Accept-Encoding")
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") || r.Header.Get("Range") != "" {
		return false
	}
	v, ok := cache.Load(clean)
	if !ok {
		raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(clean)))
		if err != nil {
			return false
		}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(raw)
		_ = zw.Close()
		var out []byte
		if b.Len() < len(raw) {
			out = b.Bytes()
		}
		v, _ = cache.LoadOrStore(clean, out)
	}
	body, _ := v.([]byte)
	if body == nil {
		return false
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	return true
}
