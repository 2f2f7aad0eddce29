package kbconnect_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/kbconnect"
)

func code(err error) string {
	if f, ok := failure.As(err); ok {
		return f.Code
	}
	return ""
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	pub, tok, err := kbconnect.Normalize(kbconnect.Dify, map[string]any{"api_base_url": "https://d.example/v1/", "api_key": " k ", "dataset_id": "ds", "extra": 1.0})
	if err != nil || tok != "k" || pub["dify_api_url"] != "https://d.example/v1" || pub["dify_dataset_id"] != "ds" || pub["extra"] != 1.0 {
		t.Fatalf("Normalize = %v %q %v", pub, tok, err)
	}
	for _, n := range []string{"dify_token", "api_key", "token"} {
		if _, ok := pub[n]; ok {
			t.Fatalf("secret %s left in the public params: %v", n, pub)
		}
	}
	if _, _, err := kbconnect.Normalize(kbconnect.Dify, map[string]any{"dify_api_url": "https://d", "dify_dataset_id": "ds"}); code(err) != "missing_connection_param" {
		t.Fatalf("no token: %v", err)
	}
	if _, _, err := kbconnect.Normalize(kbconnect.Dify, map[string]any{"dify_api_url": "file:///etc", "dify_token": "k", "dify_dataset_id": "ds"}); code(err) != "invalid_connection_param" {
		t.Fatalf("file URL: %v", err)
	}
	if _, _, err := kbconnect.Normalize("lightrag", nil); code(err) != "unsupported_kb_type" {
		t.Fatalf("unknown kind: %v", err)
	}
}

// The remote service's answers map to clear errors: 401 → connector_auth_failed,
// 404 → connector_not_found, 5xx and non-JSON → 503 connector_unavailable.
func TestDifyRetrieveErrors(t *testing.T) {
	t.Parallel()
	status := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		rm, _ := body["retrieval_model"].(map[string]any)
		if status == 0 {
			if rm["search_method"] != "full_text_search" || rm["top_k"] != 3.0 {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"records":[{"segment":{"id":"s","content":"c","document_id":"d"},"score":0.5}]}`))
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("not json"))
	}))
	defer srv.Close()
	c := &kbconnect.Client{HTTP: srv.Client()}
	src := kbconnect.Source{Kind: kbconnect.Dify, Params: map[string]any{"dify_api_url": srv.URL, "dify_dataset_id": "ds"}, Secret: "k"}
	hits, err := c.Retrieve(t.Context(), src, "q", kbconnect.Options{TopK: 3, SearchMode: "keyword"})
	if err != nil || len(hits) != 1 || hits[0].ID != "s" || hits[0].DocumentID != "d" || hits[0].Score != 0.5 {
		t.Fatalf("Retrieve = %+v, %v", hits, err)
	}
	for st, want := range map[int]string{401: "connector_auth_failed", 403: "connector_auth_failed", 404: "connector_not_found", 502: "connector_unavailable", 200: "connector_unavailable"} {
		status = st
		if _, err := c.Retrieve(t.Context(), src, "q", kbconnect.Options{}); code(err) != want {
			t.Fatalf("HTTP %d: %v, want %s", st, err, want)
		}
	}
}

// Notion: pages found by /v1/search (with the Notion-Version header and the
// bearer token), their text read from /v1/blocks/{id}/children.
func TestNotionRetrieve(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret_n" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Notion-Version") != "2022-06-28" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/search":
			var body struct {
				Query    string `json:"query"`
				PageSize int    `json:"page_size"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body.Query != "onboarding" || body.PageSize != 2 {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"results":[
				{"object":"page","id":"p1","url":"https://notion.so/p1","properties":{"Name":{"type":"title","title":[{"plain_text":"Onboarding"}]}}},
				{"object":"page","id":"p2","url":"https://notion.so/p2","properties":{"title":{"type":"title","title":[{"plain_text":"Other"}]}}},
				{"object":"page","id":"p3","properties":{}}]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/blocks/p1/children":
			_, _ = w.Write([]byte(`{"results":[{"type":"paragraph","paragraph":{"rich_text":[{"plain_text":"Read the "},{"plain_text":"handbook."}]}},{"type":"divider","divider":{}}]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/blocks/p2/children":
			_, _ = w.Write([]byte(`{"results":[{"type":"heading_1","heading_1":{"rich_text":[{"plain_text":"Misc"}]}}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	pub, tok, err := kbconnect.Normalize(kbconnect.Notion, map[string]any{"notion_api_url": srv.URL, "notion_token": "secret_n"})
	if err != nil || pub["notion_version"] != "2022-06-28" {
		t.Fatalf("Normalize: %v %v", pub, err)
	}
	c := &kbconnect.Client{HTTP: srv.Client()}
	hits, err := c.Retrieve(t.Context(), kbconnect.Source{Kind: kbconnect.Notion, Params: pub, Secret: tok}, "onboarding", kbconnect.Options{TopK: 2})
	if err != nil || len(hits) != 2 || hits[0].ID != "p1" || hits[0].Content != "Onboarding\nRead the handbook." || hits[0].DocumentName != "Onboarding" ||
		hits[1].Content != "Other\nMisc" || !(hits[0].Score > hits[1].Score) {
		t.Fatalf("Retrieve = %+v, %v", hits, err)
	}
	if _, err := c.Retrieve(t.Context(), kbconnect.Source{Kind: kbconnect.Notion, Params: pub, Secret: "bad"}, "onboarding", kbconnect.Options{TopK: 2}); code(err) != "connector_auth_failed" {
		t.Fatalf("bad token: %v", err)
	}
}
