package local

import (
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// WebHandler serves the built web UI (web/dist) at / next to api: paths
// under /api/ and /v1/ (and /v1 itself) always reach the API, so the SPA
// fallback never shadows an API route or its JSON 404. Hashed assets under
// /assets/ are immutable for a year; index.html and other files are
// revalidated on every load (no-cache), so a new build is picked up at once.
// A path with no file that looks like a page (no extension) gets index.html,
// the SPA's router shows it; a missing asset is a plain 404.
func WebHandler(dir string, api http.Handler) http.Handler {
	root := http.Dir(dir)
	files := http.FileServer(root)
	index := filepath.Join(dir, "index.html")
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
