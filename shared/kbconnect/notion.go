package kbconnect

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

type notionRichText []struct {
	PlainText string `json:"plain_text"`
}

func (r notionRichText) text() string {
	var b strings.Builder
	for _, t := range r {
		b.WriteString(t.PlainText)
	}
	return b.String()
}

type notionSearch struct {
	Results []struct {
		Object     string `json:"object"`
		ID         string `json:"id"`
		URL        string `json:"url"`
		Properties map[string]struct {
			Type  string         `json:"type"`
			Title notionRichText `json:"title"`
		} `json:"properties"`
	} `json:"results"`
}

// notionBlocks is a page's block children; every text block type keeps its
// text in <type>.rich_text.
type notionBlocks struct {
	Results []map[string]any `json:"results"`
}

func blockText(b map[string]any) string {
	typ, _ := b["type"].(string)
	body, _ := b[typ].(map[string]any)
	rt, _ := body["rich_text"].([]any)
	var sb strings.Builder
	for _, t := range rt {
		if m, ok := t.(map[string]any); ok {
			s, _ := m["plain_text"].(string)
			sb.WriteString(s)
		}
	}
	return sb.String()
}

// notion calls POST {notion_api_url}/v1/search for pages matching query
// (best first, as Notion ranks them) and reads each page's text from
// GET /v1/blocks/{id}/children. Notion gives no score: the rank's 1/(1+i).
func (c *Client) notion(ctx context.Context, src Source, query string, opt Options) ([]Hit, error) {
	base := src.param("notion_api_url")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+src.Secret)
	h.Set("Notion-Version", src.param("notion_version"))
	var found notionSearch
	body := map[string]any{"query": query, "page_size": opt.TopK, "filter": map[string]any{"property": "object", "value": "page"}}
	if err := c.call(ctx, Notion, http.MethodPost, base+"/v1/search", h, body, &found); err != nil {
		return nil, err
	}
	out := []Hit{}
	for _, p := range found.Results {
		if len(out) == opt.TopK {
			break
		}
		title := ""
		for _, prop := range p.Properties {
			if prop.Type == "title" {
				title = prop.Title.text()
			}
		}
		var blocks notionBlocks
		if err := c.call(ctx, Notion, http.MethodGet, base+"/v1/blocks/"+url.PathEscape(p.ID)+"/children?page_size=100", h, nil, &blocks); err != nil {
			return nil, err
		}
		lines := []string{}
		if title != "" {
			lines = append(lines, title)
		}
		for _, b := range blocks.Results {
			if t := blockText(b); t != "" {
				lines = append(lines, t)
			}
		}
		out = append(out, Hit{ID: p.ID, Content: strings.Join(lines, "\n"), DocumentID: p.ID, DocumentName: title,
			Score: 1 / float64(1+len(out)), Metadata: map[string]any{"url": p.URL}})
	}
	return out, nil
}
