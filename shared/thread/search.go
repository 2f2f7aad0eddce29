package thread

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// SearchSnippet is a matching message, cut around the first match.
type SearchSnippet struct {
	MessageID *int64     `json:"message_id"`
	Content   string     `json:"content"`
	CreatedAt *time.Time `json:"created_at"`
}

// SearchItem is a thread that matched (ThreadSearchItem).
type SearchItem struct {
	Thread
	ThreadID      string          `json:"thread_id"`
	MatchedCount  int             `json:"matched_count"`
	MessageID     *int64          `json:"message_id"`
	LatestMatchAt *time.Time      `json:"latest_match_at"`
	Snippets      []SearchSnippet `json:"snippets"`
}

// SearchResult is GET /api/chat/threads/search.
type SearchResult struct {
	Items   []SearchItem `json:"items"`
	HasMore bool         `json:"has_more"`
	Limit   int          `json:"limit"`
	Offset  int          `json:"offset"`
}

// SearchInput is the query of GET /api/chat/threads/search.
type SearchInput struct {
	Q       string
	AgentID string
	Limit   int // 1..50, default 20
	Offset  int
}

const (
	maxSearchQuery    = 200 // characters, as the original
	snippetsPerThread = 3
	snippetContext    = 60 // characters each side of the match
)

// likePattern makes q a case-insensitive substring pattern for ILIKE … ESCAPE '\'.
func likePattern(q string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(q) + "%"
}

// Search finds uid's threads whose title or visible user/assistant messages
// contain q (case-insensitive), most recent match first. Only uid's own
// threads are read: the first condition of every row is c.uid.
func (s *Store) Search(ctx context.Context, uid string, in SearchInput) (SearchResult, error) {
	q := strings.TrimSpace(in.Q)
	if q == "" || utf8.RuneCountInString(q) > maxSearchQuery {
		return SearchResult{}, failure.Unprocessable("invalid_query", "q must be 1 to %d characters", maxSearchQuery)
	}
	if in.Limit == 0 {
		in.Limit = 20
	}
	if in.Limit < 1 || in.Limit > 50 || in.Offset < 0 {
		return SearchResult{}, failure.Unprocessable("invalid_query", "limit must be 1 to 50 and offset non-negative")
	}
	rows, err := s.pool.Query(ctx, `
		WITH mine AS (
			SELECT c.id FROM conversations c
			WHERE c.uid = $1 AND c.status <> 'deleted' AND ($2 = '' OR c.agent_id = $2)
				AND coalesce(c.extra_metadata->>'source', '') NOT IN ('agent_call', 'agent_evaluation')
		), hits AS (
			SELECT m.conversation_id, m.id, m.content, m.created_at FROM messages m JOIN mine ON mine.id = m.conversation_id
			WHERE m.transcript_seq IS NOT NULL AND m.role IN ('user', 'assistant') AND m.message_type <> 'resume'
				AND m.content ILIKE $3 ESCAPE '\'
		), agg AS (
			SELECT conversation_id, count(*) AS n, max(created_at) AS latest FROM hits GROUP BY conversation_id
		)
		SELECT `+threadCols+`, coalesce(a.n, 0), a.latest,
			coalesce((SELECT json_agg(json_build_object('message_id', x.id, 'content', x.content, 'created_at', x.created_at))
				FROM (SELECT h.id, h.content, h.created_at FROM hits h WHERE h.conversation_id = c.id
					ORDER BY h.created_at DESC, h.id DESC LIMIT `+fmt.Sprint(snippetsPerThread)+`) x), '[]'::json)
		FROM conversations c JOIN mine ON mine.id = c.id `+latestRunJoin+`
			LEFT JOIN agg a ON a.conversation_id = c.id
		WHERE a.n IS NOT NULL OR c.title ILIKE $3 ESCAPE '\'
		ORDER BY coalesce(a.latest, c.updated_at) DESC, c.id DESC LIMIT $4 OFFSET $5`,
		uid, in.AgentID, likePattern(q), in.Limit+1, in.Offset)
	if err != nil {
		return SearchResult{}, fmt.Errorf("search threads: %w", err)
	}
	defer rows.Close()
	out := SearchResult{Items: []SearchItem{}, Limit: in.Limit, Offset: in.Offset}
	for rows.Next() {
		var (
			it       SearchItem
			snippets []byte
		)
		if err := rows.Scan(&it.ConversationID, &it.ID, &it.UID, &it.AgentID, &it.Title, &it.IsPinned, &it.CreatedAt, &it.UpdatedAt,
			&it.Metadata, &it.ThreadStatus, &it.ProjectID, &it.WorkdirPath, &it.MatchedCount, &it.LatestMatchAt, &snippets); err != nil {
			return SearchResult{}, err
		}
		var raw []struct {
			MessageID int64     `json:"message_id"`
			Content   string    `json:"content"`
			CreatedAt time.Time `json:"created_at"`
		}
		if err := json.Unmarshal(snippets, &raw); err != nil {
			return SearchResult{}, err
		}
		it.ThreadID = it.ID
		it.Snippets = make([]SearchSnippet, 0, len(raw))
		for _, r := range raw {
			id, at := r.MessageID, r.CreatedAt
			it.Snippets = append(it.Snippets, SearchSnippet{MessageID: &id, Content: Snippet(r.Content, q), CreatedAt: &at})
		}
		if len(raw) > 0 {
			id := raw[0].MessageID
			it.MessageID = &id
		} else {
			// Only the title matched.
			it.Snippets = append(it.Snippets, SearchSnippet{Content: it.Title})
		}
		out.Items = append(out.Items, it)
	}
	if err := rows.Err(); err != nil {
		return SearchResult{}, err
	}
	if len(out.Items) > in.Limit {
		out.Items, out.HasMore = out.Items[:in.Limit], true
	}
	return out, nil
}

// Snippet cuts text to snippetContext characters either side of the first
// case-insensitive occurrence of q, marking cuts with "…".
func Snippet(text, q string) string {
	rs := []rune(text)
	lower, lq := []rune(strings.ToLower(text)), []rune(strings.ToLower(q))
	at := -1
	if len(lower) == len(rs) { // case folding kept the length: positions agree
		for i := 0; i+len(lq) <= len(lower); i++ {
			if string(lower[i:i+len(lq)]) == string(lq) {
				at = i
				break
			}
		}
	}
	if at < 0 {
		at = 0
	}
	start, end := max(0, at-snippetContext), min(len(rs), at+len(lq)+snippetContext)
	out := string(rs[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(rs) {
		out += "…"
	}
	return out
}
