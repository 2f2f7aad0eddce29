package embed_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeProvider is a scripted OpenAI-compatible server: each request is
// recorded, then answered by the handler for its path.
type fakeProvider struct {
	mu       sync.Mutex
	requests []recorded
	handle   func(n int, path string, body map[string]any, w http.ResponseWriter)
}

type recorded struct {
	Path, Auth string
	Body       map[string]any
}

func newFake(t *testing.T, handle func(n int, path string, body map[string]any, w http.ResponseWriter)) (*fakeProvider, *httptest.Server) {
	t.Helper()
	f := &fakeProvider{handle: handle}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, recorded{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: body})
		n := len(f.requests)
		f.mu.Unlock()
		f.handle(n, r.URL.Path, body, w)
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeProvider) calls() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func stringList(v any) []string {
	raw, _ := v.([]any)
	out := make([]string, len(raw))
	for i, x := range raw {
		out[i], _ = x.(string)
	}
	return out
}
