package kbconnect

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode"
)

// Bounds of a Notion query: pages read from a data source (before ranking),
// block nesting read below a page, and blocks read per page.
const (
	notionMaxQueryPages = 3 // × 100 pages per data-source query call
	notionMaxDepth      = 3 // a page's blocks are depth 1
	notionMaxBlocks     = 1000
)

// notionDataSourceVersion is the first Notion-Version with data sources
// (a database holds one or more data sources; rows are queried through
// POST /v1/data_sources/{id}/query).
const notionDataSourceVersion = "2025-09-03"

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

type notionPage struct {
	Object     string `json:"object"`
	ID         string `json:"id"`
	URL        string `json:"url"`
	Properties map[string]struct {
		Type     string         `json:"type"`
		Title    notionRichText `json:"title"`
		RichText notionRichText `json:"rich_text"`
	} `json:"properties"`
}

func (p notionPage) title() string {
	for _, prop := range p.Properties {
		if prop.Type == "title" {
			return prop.Title.text()
		}
	}
	return ""
}

// propertyText is the page's title and text properties, in property-name
// order (what a data-source query ranks by).
func (p notionPage) propertyText() string {
	names := make([]string, 0, len(p.Properties))
	for n := range p.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		prop := p.Properties[n]
		parts = append(parts, prop.Title.text(), prop.RichText.text())
	}
	return strings.Join(parts, " ")
}

// notionList is a paginated list answer (search, data-source query, block
// children).
type notionList[T any] struct {
	Results    []T    `json:"results"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor"`
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
	if sb.Len() == 0 && typ == "child_page" {
		s, _ := body["title"].(string)
		return s
	}
	return sb.String()
}

// notion answers query from the pages the integration sees. Without a
// configured source it calls POST {notion_api_url}/v1/search for pages
// (best first, as Notion ranks them). With notion_data_source_id it queries
// that data source (POST /v1/data_sources/{id}/query; with
// notion_database_id and Notion-Version 2025-09-03 or later, the database's
// data sources from GET /v1/databases/{id}; with an older version,
// POST /v1/databases/{id}/query), up to 300 pages, and ranks them by the
// query's words found in their title and text properties (Notion's order
// breaks ties). Each chosen page's text is its title plus its blocks' text,
// read from GET /v1/blocks/{id}/children (every result page, start_cursor)
// and, for blocks with has_children, their children, down to 3 levels and
// 1,000 blocks; child pages and databases are not entered (they are pages
// of their own). Notion gives no score: the rank's 1/(1+i).
func (c *Client) notion(ctx context.Context, src Source, query string, opt Options) ([]Hit, error) {
	n := notionCall{c: c, base: src.param("notion_api_url"), version: src.param("notion_version"), h: http.Header{}}
	n.h.Set("Authorization", "Bearer "+src.Secret)
	n.h.Set("Notion-Version", n.version)
	var pages []notionPage
	var err error
	if ds, db := src.param("notion_data_source_id"), src.param("notion_database_id"); ds != "" || db != "" {
		pages, err = n.sourcePages(ctx, ds, db)
		if err == nil {
			pages = rankPages(pages, query)
		}
	} else {
		var found notionList[notionPage]
		body := map[string]any{"query": query, "page_size": opt.TopK, "filter": map[string]any{"property": "object", "value": "page"}}
		err = n.do(ctx, http.MethodPost, "/v1/search", body, &found)
		pages = found.Results
	}
	if err != nil {
		return nil, err
	}
	out := []Hit{}
	for _, p := range pages {
		if len(out) == opt.TopK {
			break
		}
		title := p.title()
		lines := []string{}
		if title != "" {
			lines = append(lines, title)
		}
		budget := notionMaxBlocks
		if lines, err = n.blockLines(ctx, p.ID, 1, &budget, lines); err != nil {
			return nil, err
		}
		out = append(out, Hit{ID: p.ID, Content: strings.Join(lines, "\n"), DocumentID: p.ID, DocumentName: title,
			Score: 1 / float64(1+len(out)), Metadata: map[string]any{"url": p.URL}})
	}
	return out, nil
}

type notionCall struct {
	c             *Client
	base, version string
	h             http.Header
}

func (n notionCall) do(ctx context.Context, method, path string, body, out any) error {
	return n.c.call(ctx, Notion, method, n.base+path, n.h.Clone(), body, out)
}

// sourcePages reads the pages of a data source (ds) or of a database (db),
// up to notionMaxQueryPages result pages of each data source.
func (n notionCall) sourcePages(ctx context.Context, ds, db string) ([]notionPage, error) {
	var endpoints []string
	switch {
	case ds != "":
		endpoints = []string{"/v1/data_sources/" + url.PathEscape(ds) + "/query"}
	case n.version >= notionDataSourceVersion:
		var d struct {
			DataSources []struct {
				ID string `json:"id"`
			} `json:"data_sources"`
		}
		if err := n.do(ctx, http.MethodGet, "/v1/databases/"+url.PathEscape(db), nil, &d); err != nil {
			return nil, err
		}
		for _, s := range d.DataSources {
			endpoints = append(endpoints, "/v1/data_sources/"+url.PathEscape(s.ID)+"/query")
		}
	default:
		endpoints = []string{"/v1/databases/" + url.PathEscape(db) + "/query"}
	}
	var pages []notionPage
	for _, ep := range endpoints {
		cursor := ""
		for i := 0; i < notionMaxQueryPages; i++ {
			body := map[string]any{"page_size": 100}
			if cursor != "" {
				body["start_cursor"] = cursor
			}
			var res notionList[notionPage]
			if err := n.do(ctx, http.MethodPost, ep, body, &res); err != nil {
				return nil, err
			}
			for _, p := range res.Results {
				if p.Object == "" || p.Object == "page" {
					pages = append(pages, p)
				}
			}
			if !res.HasMore || res.NextCursor == "" {
				break
			}
			cursor = res.NextCursor
		}
	}
	return pages, nil
}

// rankPages orders pages by how many of the query's distinct words (lower
// case; each CJK character a word) their title and text properties hold,
// keeping Notion's order among equals.
func rankPages(pages []notionPage, query string) []notionPage {
	words := queryWords(query)
	score := make(map[string]int, len(pages))
	for _, p := range pages {
		text := strings.ToLower(p.propertyText())
		for _, w := range words {
			if strings.Contains(text, w) {
				score[p.ID]++
			}
		}
	}
	sort.SliceStable(pages, func(i, j int) bool { return score[pages[i].ID] > score[pages[j].ID] })
	return pages
}

func queryWords(query string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(w string) {
		if w != "" && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	var cur strings.Builder
	for _, r := range strings.ToLower(query) {
		switch {
		case unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r):
			add(cur.String())
			cur.Reset()
			add(string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur.WriteRune(r)
		default:
			add(cur.String())
			cur.Reset()
		}
	}
	add(cur.String())
	return out
}

// blockLines appends the text of block id's children (every result page)
// and, depth-first, of their children, to lines; budget bounds the blocks
// read in all.
func (n notionCall) blockLines(ctx context.Context, id string, depth int, budget *int, lines []string) ([]string, error) {
	cursor := ""
	for *budget > 0 {
		q := "?page_size=100"
		if cursor != "" {
			q += "&start_cursor=" + url.QueryEscape(cursor)
		}
		var res notionList[map[string]any]
		if err := n.do(ctx, http.MethodGet, "/v1/blocks/"+url.PathEscape(id)+"/children"+q, nil, &res); err != nil {
			return nil, err
		}
		for _, b := range res.Results {
			if *budget == 0 {
				return lines, nil
			}
			*budget--
			if t := blockText(b); t != "" {
				lines = append(lines, t)
			}
			typ, _ := b["type"].(string)
			if has, _ := b["has_children"].(bool); has && depth < notionMaxDepth && typ != "child_page" && typ != "child_database" {
				bid, _ := b["id"].(string)
				var err error
				if lines, err = n.blockLines(ctx, bid, depth+1, budget, lines); err != nil {
					return nil, err
				}
			}
		}
		if !res.HasMore || res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return lines, nil
}
