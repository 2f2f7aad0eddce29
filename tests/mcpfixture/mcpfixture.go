// Package mcpfixture serves a small MCP server in-process over streamable
// HTTP with the official Go SDK, for tests that need a live server but not
// the reference one (tests/mcpeverything): tools "add" {a, b} → the sum as
// text, and "echo" {text} → the text.
//
// Imported by: tests, shared/mcp tests. May import: the standard library,
// testing, the MCP Go SDK.
package mcpfixture

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a running fixture server.
type Server struct {
	// URL is the streamable HTTP endpoint.
	URL string
	// Calls counts tools/call requests served.
	Calls atomic.Int64
	// Header is the last request's X-Test header (a configured header's
	// value reaching the server).
	Header atomic.Value
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type echoIn struct {
	Text string `json:"text"`
}

// Start serves the fixture until t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "yuxi-fixture", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
			s.Calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("The sum of %g and %g is %g.", in.A, in.B, in.A+in.B)}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes a text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			s.Calls.Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Header.Store(r.Header.Get("X-Test"))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/mcp"
	return s
}

// OpenGuard is an outbound guard that lets a test reach its loopback fixture
// server (the production guard denies loopback).
type OpenGuard struct{}

// CheckURL allows every URL.
func (OpenGuard) CheckURL(context.Context, *url.URL) error { return nil }

// Client is a plain HTTP client.
func (OpenGuard) Client() *http.Client { return &http.Client{} }
