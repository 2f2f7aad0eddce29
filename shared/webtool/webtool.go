// Package webtool is the builtin web tools: web_search (the original's
// providers: Tavily and Doubao (Volcengine) web search, chosen by
// WEB_SEARCH_PROVIDER or by which API key is configured) and web_fetch (a
// page as text). Every request goes through the SSRF-guarded client
// (shared/netguard), the search providers' too.
//
// Imported by: shared/bootstrap/chat, tests. May import: shared/tool.
package webtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Config is read by main from the environment.
type Config struct {
	Provider      string // WEB_SEARCH_PROVIDER: tavily | doubao; empty: the one whose key is set (Tavily first)
	TavilyKey     string // TAVILY_API_KEY
	TavilyBaseURL string // TAVILY_BASE_URL (default https://api.tavily.com)
	DoubaoKey     string // DOUBAO_SEARCH_API_KEY
	DoubaoBaseURL string // DOUBAO_SEARCH_BASE_URL (default https://open.feedcoopapi.com)
	FetchOff      bool   // YUXI_WEB_FETCH=off: no web_fetch tool
}

// Provider returns the search provider to use, or "" when none is configured.
func (c Config) provider() string {
	switch strings.ToLower(strings.TrimSpace(c.Provider)) {
	case "tavily":
		if c.TavilyKey != "" {
			return "tavily"
		}
	case "doubao":
		if c.DoubaoKey != "" {
			return "doubao"
		}
	case "":
		if c.TavilyKey != "" {
			return "tavily"
		}
		if c.DoubaoKey != "" {
			return "doubao"
		}
	}
	return ""
}

// Validate rejects an unknown or unusable provider choice.
func (c Config) Validate() error {
	p := strings.ToLower(strings.TrimSpace(c.Provider))
	if p != "" && p != "tavily" && p != "doubao" {
		return fmt.Errorf("WEB_SEARCH_PROVIDER=%q: want tavily or doubao", c.Provider)
	}
	if p != "" && c.provider() == "" {
		return fmt.Errorf("WEB_SEARCH_PROVIDER=%s needs its API key (TAVILY_API_KEY or DOUBAO_SEARCH_API_KEY)", p)
	}
	return nil
}

// Tools returns the web tools cfg enables, using client (the guarded one).
func Tools(cfg Config, client *http.Client) []tool.Tool {
	var out []tool.Tool
	if p := cfg.provider(); p != "" {
		out = append(out, search{cfg: cfg, provider: p, client: client})
	}
	if !cfg.FetchOff {
		out = append(out, fetch{client: client})
	}
	return out
}

const maxBody = 2 << 20

type search struct {
	cfg      Config
	provider string
	client   *http.Client
}

func (s search) Spec() tool.Spec {
	return tool.Spec{Name: "web_search", DisplayName: "Web search", Category: "buildin", Tags: []string{"search"},
		Description: "Search the web for current information. Returns titles, URLs and summaries of the top results.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{` +
			`"query":{"type":"string","description":"What to search for (keywords, not the user's whole message)."},` +
			`"max_results":{"type":"integer","minimum":1,"maximum":20,"description":"How many results (default 5)."}}}`)}
}

type result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Content string `json:"content"`
}

func (s search) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
	}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return tool.Errorf("invalid arguments: query (a non-empty string) is required"), nil
	}
	if args.MaxResults <= 0 || args.MaxResults > 20 {
		args.MaxResults = 5
	}
	var results []result
	var answer string
	var err error
	switch s.provider {
	case "tavily":
		results, answer, err = s.tavily(ctx, args.Query, args.MaxResults)
	default:
		results, err = s.doubao(ctx, args.Query, args.MaxResults)
	}
	if err != nil {
		return tool.Errorf(fmt.Sprintf("web search (%s) failed: %v", s.provider, err)), nil
	}
	out, err := tool.JSON(map[string]any{"query": args.Query, "provider": s.provider, "answer": answer, "results": results})
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: out}, nil
}

func (s search) post(ctx context.Context, endpoint, key string, body any, out any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(string(data), 300))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("unreadable answer: %v", err)
	}
	return nil
}

func base(v, def string) string {
	if v == "" {
		v = def
	}
	return strings.TrimRight(v, "/")
}

// tavily: POST {base}/search.
func (s search) tavily(ctx context.Context, q string, n int) ([]result, string, error) {
	var resp struct {
		Answer  string `json:"answer"`
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := s.post(ctx, base(s.cfg.TavilyBaseURL, "https://api.tavily.com")+"/search", s.cfg.TavilyKey,
		map[string]any{"query": q, "max_results": n, "search_depth": "basic"}, &resp); err != nil {
		return nil, "", err
	}
	out := []result{}
	for _, r := range resp.Results {
		out = append(out, result{Title: r.Title, URL: r.URL, Content: r.Content})
	}
	return out, resp.Answer, nil
}

// doubao: POST {base}/search_api/web_search; Summary preferred over Snippet.
func (s search) doubao(ctx context.Context, q string, n int) ([]result, error) {
	var resp struct {
		ResponseMetadata struct {
			Error *struct {
				Code    string `json:"Code"`
				Message string `json:"Message"`
			} `json:"Error"`
		} `json:"ResponseMetadata"`
		Result struct {
			WebResults []struct {
				Title   string `json:"Title"`
				URL     string `json:"Url"`
				Snippet string `json:"Snippet"`
				Summary string `json:"Summary"`
			} `json:"WebResults"`
		} `json:"Result"`
	}
	if err := s.post(ctx, base(s.cfg.DoubaoBaseURL, "https://open.feedcoopapi.com")+"/search_api/web_search", s.cfg.DoubaoKey,
		map[string]any{"Query": q, "SearchType": "web", "Count": n, "NeedSummary": true}, &resp); err != nil {
		return nil, err
	}
	if e := resp.ResponseMetadata.Error; e != nil && e.Code != "" {
		return nil, fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	out := []result{}
	for _, r := range resp.Result.WebResults {
		content := r.Summary
		if strings.TrimSpace(content) == "" {
			content = r.Snippet
		}
		out = append(out, result{Title: r.Title, URL: r.URL, Content: content})
	}
	return out, nil
}

type fetch struct{ client *http.Client }

func (fetch) Spec() tool.Spec {
	return tool.Spec{Name: "web_fetch", DisplayName: "Fetch web page", Category: "buildin", Tags: []string{"web"},
		Description: "Fetch a public web page (http or https) and return its text. Private and local addresses are refused.",
		Parameters: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["url"],"properties":{` +
			`"url":{"type":"string","description":"The page's absolute http(s) URL."},` +
			`"max_chars":{"type":"integer","minimum":100,"maximum":100000,"description":"Longest text returned (default 20000)."}}}`)}
}

func (f fetch) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args struct {
		URL      string `json:"url"`
		MaxChars int    `json:"max_chars"`
	}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		return tool.Errorf("invalid arguments: " + err.Error()), nil
	}
	u, err := url.Parse(strings.TrimSpace(args.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return tool.Errorf("url must be an absolute http(s) URL"), nil
	}
	if args.MaxChars <= 0 || args.MaxChars > 100000 {
		args.MaxChars = 20000
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tool.Errorf(err.Error()), nil
	}
	req.Header.Set("User-Agent", "yuxi-web-fetch/1")
	req.Header.Set("Accept", "text/html, text/plain, application/json;q=0.9, */*;q=0.5")
	resp, err := f.client.Do(req)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("fetch %s: %v", u.Redacted(), err)), nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return tool.Errorf(fmt.Sprintf("fetch %s: %v", u.Redacted(), err)), nil
	}
	if resp.StatusCode/100 != 2 {
		return tool.Errorf(fmt.Sprintf("fetch %s: HTTP %d", u.Redacted(), resp.StatusCode)), nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	text := string(data)
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		text = htmlText(text)
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml" || mt == "":
	default:
		return tool.Errorf(fmt.Sprintf("fetch %s: content type %s is not text", u.Redacted(), mt)), nil
	}
	out, err := tool.JSON(map[string]any{"url": resp.Request.URL.String(), "status": resp.StatusCode, "content_type": mt,
		"content": truncate(text, args.MaxChars)})
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Output: out}, nil
}

var (
	dropBlocks = regexp.MustCompile(`(?is)<(script|style|noscript|template|svg|head)\b.*?</(script|style|noscript|template|svg|head)\s*>`)
	comments   = regexp.MustCompile(`(?s)<!--.*?-->`)
	blockTags  = regexp.MustCompile(`(?i)</?(p|div|br|li|ul|ol|h[1-6]|tr|table|section|article|header|footer|blockquote|pre)\b[^>]*>`)
	anyTag     = regexp.MustCompile(`(?s)<[^>]*>`)
	spaces     = regexp.MustCompile(`[ \t\r\f\v]+`)
	blankLines = regexp.MustCompile(`\n\s*\n+`)
)

// htmlText is the readable text of an HTML page: scripts, styles and
// comments dropped, block elements on their own lines, entities decoded.
func htmlText(s string) string {
	s = comments.ReplaceAllString(s, "")
	s = dropBlocks.ReplaceAllString(s, "")
	s = blockTags.ReplaceAllString(s, "\n")
	s = anyTag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	s = spaces.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.TrimSpace(blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…[truncated]"
}
