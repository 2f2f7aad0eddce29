package kb

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Window is an opened stretch of a parsed document (open_kb_document).
type Window struct {
	KBID          string `json:"kb_id"`
	FileID        string `json:"file_id"`
	StartLine     int    `json:"start_line"`
	EndLine       int    `json:"end_line"`
	TotalLines    int    `json:"total_lines"`
	Offset        int    `json:"offset"`
	WindowSize    int    `json:"window_size"`
	HasMoreBefore bool   `json:"has_more_before"`
	HasMoreAfter  bool   `json:"has_more_after"`
	NextOffset    *int   `json:"next_offset"`
	Content       string `json:"content"`
}

// Open limits.
const (
	DefaultOpenWindow = 1800
	MaxOpenWindow     = 2000
)

// lines splits Markdown into lines (a trailing newline adds no line).
func lines(md string) []string {
	md = strings.ReplaceAll(md, "\r\n", "\n")
	if md == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(md, "\n"), "\n")
}

func numbered(ls []string, from int) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", from+i, l)
	}
	return b.String()
}

// OpenWindow returns window lines of md starting at offset (0-based), or at
// line (1-based) when line > 0 — line wins over offset. Lines are numbered
// "%6d\t<line>" as the original's tool output.
func OpenWindow(kbID, fileID, md string, line, offset, window int) (Window, error) {
	if window == 0 {
		window = DefaultOpenWindow
	}
	if window < 1 || window > MaxOpenWindow {
		return Window{}, failure.Unprocessable("invalid_window", "window_size must be between 1 and %d", MaxOpenWindow)
	}
	if line < 0 || offset < 0 {
		return Window{}, failure.Unprocessable("invalid_window", "line must be ≥ 1 and offset ≥ 0")
	}
	ls := lines(md)
	if line > 0 {
		offset = line - 1
	}
	total := len(ls)
	w := Window{KBID: kbID, FileID: fileID, TotalLines: total, Offset: offset, WindowSize: window}
	if offset >= total {
		if total == 0 && offset == 0 {
			return w, nil
		}
		return Window{}, failure.Unprocessable("offset_out_of_range", "the document has %d lines; offset %d is past its end", total, offset)
	}
	end := min(offset+window, total)
	w.StartLine, w.EndLine = offset+1, end
	w.HasMoreBefore, w.HasMoreAfter = offset > 0, end < total
	if w.HasMoreAfter {
		next := end
		w.NextOffset = &next
	}
	w.Content = numbered(ls[offset:end], offset+1)
	return w, nil
}

// FindWindow is one match window of find_kb_document.
type FindWindow struct {
	StartLine    int    `json:"start_line"`
	EndLine      int    `json:"end_line"`
	MatchedLines []int  `json:"matched_lines"`
	Content      string `json:"content"`
}

// FindResult is find_kb_document's output.
type FindResult struct {
	KBID         string       `json:"kb_id"`
	FileID       string       `json:"file_id"`
	Semantic     bool         `json:"semantic"`
	MatchMode    string       `json:"match_mode"` // keyword | regex
	TotalMatches int          `json:"total_matches"`
	Windows      []FindWindow `json:"windows"`
}

// FindOptions are find_kb_document's options.
type FindOptions struct {
	Patterns      []string `json:"patterns"`
	UseRegex      bool     `json:"use_regex"`
	CaseSensitive bool     `json:"case_sensitive"`
	MaxWindows    int      `json:"max_windows"`
	WindowSize    int      `json:"window_size"`
}

// Find locates lines of md matching any pattern and returns up to
// MaxWindows non-overlapping windows of WindowSize lines, each centred on a
// match (half the window before it).
func Find(kbID, fileID, md string, o FindOptions) (FindResult, error) {
	if o.MaxWindows == 0 {
		o.MaxWindows = 5
	}
	if o.WindowSize == 0 {
		o.WindowSize = 80
	}
	if len(o.Patterns) == 0 {
		return FindResult{}, failure.Unprocessable("invalid_patterns", "patterns must list at least one pattern")
	}
	if o.MaxWindows < 1 || o.MaxWindows > 20 || o.WindowSize < 1 || o.WindowSize > 200 {
		return FindResult{}, failure.Unprocessable("invalid_window", "max_windows must be 1–20 and window_size 1–200")
	}
	var matchers []func(string) bool
	for _, p := range o.Patterns {
		if strings.TrimSpace(p) == "" {
			return FindResult{}, failure.Unprocessable("invalid_patterns", "patterns must not be empty")
		}
		if len(p) > 500 {
			return FindResult{}, failure.Unprocessable("invalid_patterns", "a pattern is longer than 500 characters")
		}
		if o.UseRegex {
			expr := p
			if !o.CaseSensitive {
				expr = "(?i)" + expr
			}
			re, err := regexp.Compile(expr)
			if err != nil {
				return FindResult{}, failure.Unprocessable("invalid_patterns", "pattern %q is not a valid regular expression: %v", p, err)
			}
			matchers = append(matchers, re.MatchString)
			continue
		}
		needle := p
		if !o.CaseSensitive {
			needle = strings.ToLower(p)
		}
		matchers = append(matchers, func(l string) bool {
			if !o.CaseSensitive {
				l = strings.ToLower(l)
			}
			return strings.Contains(l, needle)
		})
	}
	res := FindResult{KBID: kbID, FileID: fileID, MatchMode: "keyword", Windows: []FindWindow{}}
	if o.UseRegex {
		res.MatchMode = "regex"
	}
	ls := lines(md)
	var matches []int // 0-based
	for i, l := range ls {
		for _, m := range matchers {
			if m(l) {
				matches = append(matches, i)
				break
			}
		}
	}
	res.TotalMatches = len(matches)
	covered := -1 // last line index inside a window
	for _, m := range matches {
		if m <= covered {
			// Inside the last window (also when it is the last one allowed).
			w := &res.Windows[len(res.Windows)-1]
			w.MatchedLines = append(w.MatchedLines, m+1)
			continue
		}
		if len(res.Windows) == o.MaxWindows {
			break
		}
		start := max(m-o.WindowSize/2, covered+1, 0)
		end := min(start+o.WindowSize, len(ls)) // exclusive
		covered = end - 1
		res.Windows = append(res.Windows, FindWindow{StartLine: start + 1, EndLine: end, MatchedLines: []int{m + 1},
			Content: numbered(ls[start:end], start+1)})
	}
	return res, nil
}
