package userfiles

import (
	"context"
	"sort"
	"strings"
	"unicode"

	"github.com/yuxi-serverless/yuxi/shared/sandbox"
)

// internalDirs are intermediate products the searches leave out, as the
// original hides them from mentions.
var internalDirs = []string{"/large_tool_results", "/conversation_history"}

// search lists dir recursively and ranks paths against query (every
// entry when query is empty, newest first). At most limit (default 50, at
// most 200) entries.
func (s *Service) search(ctx context.Context, sc sandbox.Scope, dir, query string, limit int, display func(string) string) ([]Entry, error) {
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 200)
	es, _, err := s.cfg.Sandbox.List(ctx, sc, dir, 32)
	if isNotFound(err) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fileErr(err, dir)
	}
	type hit struct {
		e     Entry
		score int
		mod   string
	}
	var hits []hit
	q := strings.ToLower(strings.TrimSpace(query))
	for _, e := range es {
		if hidden(e.Path) {
			continue
		}
		score := 1
		if q != "" {
			score = fuzzy(strings.ToLower(e.Path), strings.ToLower(e.Name), q)
			if score == 0 {
				continue
			}
		}
		ent := entryOf(e, display(e.Path))
		hits = append(hits, hit{ent, score, ent.ModifiedAt})
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		if hits[i].mod != hits[j].mod {
			return hits[i].mod > hits[j].mod
		}
		return hits[i].e.Path < hits[j].e.Path
	})
	out := make([]Entry, 0, min(limit, len(hits)))
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].e)
	}
	return out, nil
}

func hidden(p string) bool {
	for _, d := range internalDirs {
		if strings.Contains(p, d+"/") || strings.HasSuffix(p, d) {
			return true
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, ".") && strings.Contains(seg, ".tmp-") {
			return true
		}
	}
	return false
}

// fuzzy scores how well q matches a path: an exact name beats a name
// prefix, beats a substring of the name, beats a substring of the path,
// beats the query's letters in order (a subsequence); 0 is no match.
func fuzzy(p, name, q string) int {
	switch {
	case name == q:
		return 1000
	case strings.HasPrefix(name, q):
		return 800
	case strings.Contains(name, q):
		return 600
	case strings.Contains(p, q):
		return 400
	}
	// Subsequence of the name, then of the path; tighter spans score higher.
	for _, target := range []struct {
		s    string
		base int
	}{{name, 300}, {p, 100}} {
		if span, ok := subsequence(target.s, q); ok {
			return target.base - min(span-len(q), target.base-1)
		}
	}
	return 0
}

func subsequence(s, q string) (span int, ok bool) {
	qr := []rune(q)
	start, j := -1, 0
	for i, r := range []rune(s) {
		if j < len(qr) && (r == qr[j] || (unicode.IsSpace(qr[j]) && !unicode.IsLetter(r))) {
			if start < 0 {
				start = i
			}
			j++
			if j == len(qr) {
				return i - start + 1, true
			}
		}
	}
	return 0, false
}
