package llm_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm"
)

// newRawServer is for provider behaviour the scripted fake does not model
// (odd field names, plain-text errors); it writes the wire by hand.
func newRawServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs
}

func rawModel(t *testing.T, hs *httptest.Server) llm.ChatModel {
	t.Helper()
	return llm.NewClient(llm.Provider{ID: "raw", BaseURL: hs.URL + "/v1"}, hs.Client())
}

// rawRequest is a minimal request for a raw server (a bare Client needs the
// model id set).
func rawRequest() llm.Request {
	return llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}
