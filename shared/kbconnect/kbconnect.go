// Package kbconnect is the read-only knowledge-base connectors (kb_type
// "dify" and "notion"): the schema of each connector's connection
// parameters (rendered by the web UI's create form), their validation, and
// retrieval through the remote service's HTTP API — Dify's dataset
// retrieve API, Notion's search, data-source query and block-children APIs — with the caller's (SSRF-guarded)
// HTTP client. Results come back as Hits; shared/kb shapes them as native
// query results.
//
// Imported by: shared/kb. May import: stdlib and shared/failure only.
package kbconnect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Kinds.
const (
	Dify   = "dify"
	Notion = "notion"
)

// Field is one connection parameter of a connector's create form.
type Field struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Type        string `json:"type"` // "string", "url", "password"
	Required    bool   `json:"required"`
	Secret      bool   `json:"secret"` // encrypted at rest, never returned
	Default     string `json:"default,omitempty"`
	Description string `json:"description,omitempty"`
	// Aliases are other accepted input names.
	Aliases []string `json:"-"`
}

var schemas = map[string][]Field{
	Dify: {
		{Name: "dify_api_url", Label: "Dify API URL", Type: "url", Required: true, Aliases: []string{"api_base_url", "api_url"},
			Description: "Base URL of the Dify service API, e.g. https://api.dify.ai/v1"},
		{Name: "dify_token", Label: "Dataset API key", Type: "password", Required: true, Secret: true, Aliases: []string{"api_key", "token"}},
		{Name: "dify_dataset_id", Label: "Dataset ID", Type: "string", Required: true, Aliases: []string{"dataset_id"}},
	},
	Notion: {
		{Name: "notion_api_url", Label: "Notion API URL", Type: "url", Default: "https://api.notion.com", Aliases: []string{"api_base_url"}},
		{Name: "notion_token", Label: "Integration token", Type: "password", Required: true, Secret: true, Aliases: []string{"api_key", "token"}},
		{Name: "notion_version", Label: "Notion-Version", Type: "string", Default: "2022-06-28",
			Description: "2025-09-03 or later for data sources"},
		{Name: "notion_data_source_id", Label: "Data source ID", Type: "string", Aliases: []string{"data_source_id"},
			Description: "query this data source's pages instead of searching the whole workspace"},
		{Name: "notion_database_id", Label: "Database ID", Type: "string", Aliases: []string{"database_id"},
			Description: "query this database's pages (its data sources from Notion-Version 2025-09-03)"},
	},
}

// Schema returns kind's connection fields (nil for an unknown kind).
func Schema(kind string) []Field { return schemas[kind] }

// Supported tells whether kind is a connector.
func Supported(kind string) bool { return schemas[kind] != nil }

// Normalize validates raw (the create request's additional_params) for
// kind and splits it into the public parameters, stored and returned as
// additional_params, and the secret, stored sealed. Other keys of raw are
// kept in public unless they name a secret field.
func Normalize(kind string, raw map[string]any) (public map[string]any, secretValue string, err error) {
	fields := schemas[kind]
	if fields == nil {
		return nil, "", failure.Unprocessable("unsupported_kb_type", "kb_type %q is not a connector", kind)
	}
	public = map[string]any{}
	taken := map[string]bool{}
	for _, f := range fields {
		v := ""
		for _, n := range append([]string{f.Name}, f.Aliases...) {
			taken[n] = true
			if s, ok := raw[n].(string); ok && strings.TrimSpace(s) != "" && v == "" {
				v = strings.TrimSpace(s)
			}
		}
		if v == "" {
			v = f.Default
		}
		if v == "" {
			if f.Required {
				return nil, "", failure.Unprocessable("missing_connection_param", "%s knowledge bases need %s (%s)", kind, f.Name, f.Label)
			}
			continue
		}
		if f.Type == "url" {
			u, perr := url.Parse(v)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, "", failure.Unprocessable("invalid_connection_param", "%s must be an http(s) URL", f.Name)
			}
			v = strings.TrimRight(v, "/")
		}
		if f.Secret {
			secretValue = v
			continue
		}
		public[f.Name] = v
	}
	for k, v := range raw {
		if !taken[k] {
			public[k] = v
		}
	}
	return public, secretValue, nil
}

// Redacted stands for a secret in what is returned.
const Redacted = "********"

// Redact returns public with a marker for each secret field of kind, so a
// reader sees that a secret is set without seeing it.
func Redact(kind string, public map[string]any) map[string]any {
	for _, f := range schemas[kind] {
		if f.Secret {
			public[f.Name] = Redacted
		}
	}
	return public
}

// Source is a connector KB's connection.
type Source struct {
	Kind   string
	Params map[string]any // public parameters (Normalize)
	Secret string
}

func (s Source) param(name string) string {
	v, _ := s.Params[name].(string)
	return v
}

// Options are the retrieval options a connector understands.
type Options struct {
	TopK int
	// SearchMode is the KB's search mode: "vector", "keyword" or "hybrid".
	SearchMode     string
	ScoreThreshold float64
}

// Hit is one retrieved passage.
type Hit struct {
	ID           string
	Content      string
	DocumentID   string
	DocumentName string
	Score        float64
	Metadata     map[string]any
}

// Errors.
var (
	ErrAuth = failure.Unprocessable("connector_auth_failed",
		"the remote knowledge base refused the stored credentials; update the knowledge base's token")
)

// Client retrieves from connectors through HTTP (an SSRF-guarded client in production).
type Client struct {
	HTTP *http.Client
}

// Retrieve queries src.
func (c *Client) Retrieve(ctx context.Context, src Source, query string, opt Options) ([]Hit, error) {
	if opt.TopK <= 0 {
		opt.TopK = 10
	}
	switch src.Kind {
	case Dify:
		return c.dify(ctx, src, query, opt)
	case Notion:
		return c.notion(ctx, src, query, opt)
	}
	return nil, failure.Unprocessable("unsupported_kb_type", "kb_type %q is not a connector", src.Kind)
}

// unavailable wraps a failure to reach or understand the remote service.
func unavailable(kind string, err error) error {
	return failure.New(failure.KindUnavailable, "connector_unavailable", "the %s service could not answer: %v", kind, err)
}

// call sends body (none when nil) to endpoint and decodes the JSON answer into out.
func (c *Client) call(ctx context.Context, kind, method, endpoint string, header http.Header, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		return failure.Unprocessable("invalid_connection_param", "bad %s endpoint: %v", kind, err)
	}
	req.Header = header
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return unavailable(kind, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return unavailable(kind, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return ErrAuth
	case resp.StatusCode == http.StatusNotFound:
		return failure.Unprocessable("connector_not_found", "the %s service does not know this data source (404); check its id", kind)
	case resp.StatusCode/100 != 2:
		return unavailable(kind, fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(string(data), 300)))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return unavailable(kind, errors.New("the answer is not the expected JSON"))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
