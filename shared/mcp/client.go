package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// ToolDef is one tool as an MCP server lists it.
type ToolDef struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// HTTPClients returns the SSRF-guarded client MCP connections use
// (netguard.Guard satisfies it).
type HTTPClients interface {
	Client() *http.Client
}

// Pool keeps one client session per server configuration (keyed by config
// hash), so that a tool call costs one request, not an initialize handshake.
// A session that fails is dropped; the next use reconnects. Safe for
// concurrent use.
type Pool struct {
	http   HTTPClients
	client *sdk.Client
	mu     sync.Mutex
	conns  map[string]*conn
}

type conn struct {
	ready   chan struct{}
	session *sdk.ClientSession
	err     error
}

// NewPool returns a pool dialling through http.
func NewPool(http HTTPClients) *Pool {
	return &Pool{http: http, client: sdk.NewClient(&sdk.Implementation{Name: "yuxi", Version: "1"}, nil), conns: map[string]*conn{}}
}

// headerTransport adds the server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

func (p *Pool) transport(s Server) (sdk.Transport, error) {
	hc := p.http.Client()
	hc.Timeout = 0 // streams stay open; calls are bounded by their context
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = headerTransport{base: base, headers: s.Headers}
	switch s.Transport {
	case TransportStreamableHTTP:
		// No standalone SSE stream (we need no server-initiated messages) and
		// no reconnect loop: a dead server is a prompt, clear tool error.
		return &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil
	case TransportSSE:
		return &sdk.SSEClientTransport{Endpoint: s.URL, HTTPClient: hc}, nil
	}
	return nil, fmt.Errorf("transport %q is not supported", s.Transport)
}

func connectTimeout(s Server) time.Duration {
	if s.Timeout > 0 {
		return time.Duration(s.Timeout) * time.Second
	}
	return 30 * time.Second
}

// session returns a connected session for s, connecting once per config.
func (p *Pool) session(ctx context.Context, s Server) (*sdk.ClientSession, error) {
	key := s.Slug + "/" + s.ConfigHash
	p.mu.Lock()
	c, ok := p.conns[key]
	if !ok {
		c = &conn{ready: make(chan struct{})}
		p.conns[key] = c
		p.mu.Unlock()
		c.session, c.err = p.connect(ctx, s)
		close(c.ready)
		if c.err != nil {
			p.drop(key, c)
		}
		return c.session, c.err
	}
	p.mu.Unlock()
	select {
	case <-c.ready:
		return c.session, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Pool) connect(ctx context.Context, s Server) (*sdk.ClientSession, error) {
	t, err := p.transport(s)
	if err != nil {
		return nil, err
	}
	// The session outlives this call: connect under a context that is not
	// cancelled with it, bounded by the server's timeout.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout(s))
	defer cancel()
	return p.client.Connect(cctx, t, nil)
}

func (p *Pool) drop(key string, c *conn) {
	p.mu.Lock()
	if p.conns[key] == c {
		delete(p.conns, key)
	}
	p.mu.Unlock()
	if c.session != nil {
		_ = c.session.Close()
	}
}

func (p *Pool) dropSession(s Server, sess *sdk.ClientSession) {
	key := s.Slug + "/" + s.ConfigHash
	p.mu.Lock()
	c := p.conns[key]
	p.mu.Unlock()
	if c != nil && c.session == sess {
		p.drop(key, c)
	}
}

// Close ends every session.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*conn{}
	p.mu.Unlock()
	for _, c := range conns {
		select {
		case <-c.ready:
			if c.session != nil {
				_ = c.session.Close()
			}
		default:
		}
	}
}

// withSession runs f on a session; when f fails with a transport error on a
// reused session it reconnects once (the server may have restarted).
func (p *Pool) withSession(ctx context.Context, s Server, f func(*sdk.ClientSession) error) error {
	for attempt := 0; ; attempt++ {
		sess, err := p.session(ctx, s)
		if err != nil {
			return fmt.Errorf("connect to MCP server %s: %w", s.Slug, err)
		}
		err = f(sess)
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Any failure drops the session (the next use reconnects); only a
		// closed connection of a reused session is retried here, once.
		p.dropSession(s, sess)
		if attempt == 0 && (errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing)) {
			continue
		}
		return err
	}
}

// ListTools fetches a server's tools.
func (p *Pool) ListTools(ctx context.Context, s Server) ([]ToolDef, error) {
	var out []ToolDef
	err := p.withSession(ctx, s, func(sess *sdk.ClientSession) error {
		out = nil
		params := &sdk.ListToolsParams{}
		for {
			res, err := sess.ListTools(ctx, params)
			if err != nil {
				return err
			}
			for _, t := range res.Tools {
				schema, _ := json.Marshal(t.InputSchema)
				if len(schema) == 0 || string(schema) == "null" {
					schema = json.RawMessage(`{"type":"object"}`)
				}
				out = append(out, ToolDef{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema})
			}
			if res.NextCursor == "" {
				return nil
			}
			params = &sdk.ListToolsParams{Cursor: res.NextCursor}
		}
	})
	return out, err
}

// CallResult is a tool call's outcome as text for the model.
type CallResult struct {
	Text    string
	IsError bool
}

// CallTool calls one tool. A transport failure (the server died, refused,
// timed out) is an error; a tool's own failure is CallResult.IsError.
func (p *Pool) CallTool(ctx context.Context, s Server, name string, args map[string]any) (CallResult, error) {
	var out CallResult
	err := p.withSession(ctx, s, func(sess *sdk.ClientSession) error {
		res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return err
		}
		out = CallResult{Text: contentText(res), IsError: res.IsError}
		return nil
	})
	return out, err
}

// contentText renders a result for the model: text parts as they are,
// other parts as compact JSON; structured content when there is no text.
func contentText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", v.MIMEType, len(v.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", v.MIMEType, len(v.Data)))
		default:
			if b, err := tool.JSON(c); err == nil {
				parts = append(parts, b)
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := tool.JSON(res.StructuredContent); err == nil {
			parts = append(parts, b)
		}
	}
	return strings.Join(parts, "\n")
}
