package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
)

// kbOpen prints lines of a document's parsed Markdown:
// kb open KB_ID FILE_ID [--offset N] [--limit N].
func (a *app) kbOpen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kb open", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	offset := fs.Int("offset", 0, "first line (0-based)")
	limit := fs.Int("limit", 200, "lines (at most 1800)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usagef("kb open: %v", err)
	}
	if len(pos) != 2 {
		return usagef("kb open KB_ID FILE_ID [--offset N] [--limit N]")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var win map[string]any
	path := fmt.Sprintf("/api/knowledge/databases/external/%s/files/%s/open?offset=%d&limit=%d",
		url.PathEscape(pos[0]), url.PathEscape(pos[1]), *offset, *limit)
	if err := c.getJSON(ctx, path, &win); err != nil {
		return err
	}
	return a.out(win, func(w io.Writer) {
		fmt.Fprintln(w, win["content"])
		if win["has_more_after"] == true {
			fmt.Fprintf(w, "… more from --offset %v\n", win["next_offset"])
		}
	})
}

// kbFind prints the windows of a document around lines matching patterns:
// kb find KB_ID FILE_ID PATTERN... [--regex] [--case-sensitive].
func (a *app) kbFind(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kb find", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	regex := fs.Bool("regex", false, "patterns are regular expressions")
	cs := fs.Bool("case-sensitive", false, "match case")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usagef("kb find: %v", err)
	}
	if len(pos) < 3 {
		return usagef("kb find KB_ID FILE_ID PATTERN... [--regex] [--case-sensitive]")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var res map[string]any
	path := fmt.Sprintf("/api/knowledge/databases/external/%s/files/%s/find", url.PathEscape(pos[0]), url.PathEscape(pos[1]))
	if err := c.postJSON(ctx, path, map[string]any{"patterns": pos[2:], "use_regex": *regex, "case_sensitive": *cs}, &res); err != nil {
		return err
	}
	return a.out(res, func(w io.Writer) {
		wins, _ := res["windows"].([]any)
		for _, x := range wins {
			m, _ := x.(map[string]any)
			fmt.Fprintf(w, "--- lines %v-%v\n%v\n", m["start_line"], m["end_line"], m["content"])
		}
		if len(wins) == 0 {
			fmt.Fprintln(w, "no match")
		}
	})
}
