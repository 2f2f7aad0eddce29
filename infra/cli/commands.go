package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

func (a *app) login(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("api-key", "", "API key (yxkey_…)")
	if err := fs.Parse(args); err != nil {
		return usagef("login: %v", err)
	}
	if *key == "" {
		return usagef("login --api-key KEY (browser login is not available yet)")
	}
	name, r, err := a.current()
	if err != nil {
		return err
	}
	m, err := newClient(r.URL, *key).me(ctx)
	if err != nil {
		return fmt.Errorf("login to %s: %w", name, err)
	}
	r.APIKey = *key
	if err := a.cfg.save(a.cfgPath); err != nil {
		return err
	}
	return a.out(map[string]any{"remote": name, "uid": m.UID, "role": m.Role}, func(w io.Writer) {
		fmt.Fprintf(w, "logged in to %s as %s (%s)\n", name, m.UID, m.Role)
	})
}

func (a *app) whoami(ctx context.Context) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	m, err := c.me(ctx)
	if err != nil {
		return err
	}
	return a.out(m, func(w io.Writer) { fmt.Fprintf(w, "%s (%s)\n", m.UID, m.Role) })
}

func (a *app) status(ctx context.Context) error {
	name, r, err := a.current()
	if err != nil {
		return err
	}
	st := map[string]any{"remote": name, "url": r.URL, "reachable": false, "logged_in": false}
	if _, err := newClient(r.URL, "").ping(ctx); err == nil {
		st["reachable"] = true
	}
	if r.APIKey != "" {
		if m, err := newClient(r.URL, r.APIKey).me(ctx); err == nil {
			st["logged_in"], st["uid"], st["role"] = true, m.UID, m.Role
		}
	}
	return a.out(st, func(w io.Writer) {
		fmt.Fprintf(w, "remote\t%s (%s)\nreachable\t%v\n", name, r.URL, st["reachable"])
		if st["logged_in"] == true {
			fmt.Fprintf(w, "logged in as\t%s (%s)\n", st["uid"], st["role"])
		} else {
			fmt.Fprintf(w, "logged in\tno\n")
		}
	})
}

func (a *app) logout() error {
	name, r, err := a.current()
	if err != nil {
		return err
	}
	r.APIKey = ""
	if err := a.cfg.save(a.cfgPath); err != nil {
		return err
	}
	return a.out(map[string]any{"remote": name, "logged_in": false}, func(w io.Writer) { fmt.Fprintf(w, "logged out of %s\n", name) })
}

type kbRow struct {
	KBID        string `json:"kb_id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (a *app) kbList(ctx context.Context) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var out struct {
		Databases []struct {
			KBID        string `json:"kb_id"`
			DBID        string `json:"db_id"`
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"databases"`
	}
	if err := c.getJSON(ctx, "/api/knowledge/databases/external", &out); err != nil {
		return err
	}
	rows := []kbRow{}
	for _, d := range out.Databases {
		id := d.KBID
		if id == "" {
			id = d.DBID
		}
		rows = append(rows, kbRow{KBID: id, Name: d.Name, Description: d.Description})
	}
	return a.out(rows, func(w io.Writer) {
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\n", r.KBID, r.Name, r.Description)
		}
	})
}

func (a *app) kbQuery(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("kb query", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	topK := fs.Int("top-k", 5, "results")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usagef("kb query: %v", err)
	}
	if len(pos) < 2 {
		return usagef("kb query KB_ID QUERY")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var out map[string]any
	if err := c.postJSON(ctx, "/api/knowledge/databases/external/"+url.PathEscape(pos[0])+"/retrieve",
		map[string]any{"query": strings.Join(pos[1:], " "), "meta": map[string]any{"final_top_k": *topK}}, &out); err != nil {
		return err
	}
	return a.out(out, func(w io.Writer) {
		results, _ := out["results"].([]any)
		if len(results) == 0 {
			results, _ = out["chunks"].([]any)
		}
		for i, r := range results {
			m, _ := r.(map[string]any)
			content, _ := m["content"].(string)
			if len(content) > 200 {
				content = content[:200] + "…"
			}
			fmt.Fprintf(w, "%d. %v\t%s\n", i+1, firstOf(m, "filename", "file_name", "source"), oneLine(content))
		}
		if len(results) == 0 {
			fmt.Fprintln(w, "no results")
		}
	})
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			return v
		}
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range keys {
			if v, ok := md[k]; ok && v != nil {
				return v
			}
		}
	}
	return "-"
}

// parseInterspersed parses flags that may follow positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
