package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

func (a *app) login(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	key := fs.String("api-key", "", "API key (yxkey_…)")
	browser := fs.Bool("browser", false, "sign in with the browser (device code)")
	noOpen := fs.Bool("no-open", false, "with --browser: print the address, do not open a browser")
	if err := fs.Parse(args); err != nil {
		return usagef("login: %v", err)
	}
	if (*key == "") == !*browser {
		return usagef("login --api-key KEY, or login --browser [--no-open]")
	}
	name, r, err := a.current()
	if err != nil {
		return err
	}
	if *browser {
		if *key, err = a.deviceLogin(ctx, r.URL, !*noOpen); err != nil {
			return fmt.Errorf("login to %s: %w", name, err)
		}
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

// deviceLogin is the device-code flow: the platform issues a user code,
// the person approves it in a signed-in browser, and the CLI, polling at
// the platform's interval, exchanges its device code for a new API key.
func (a *app) deviceLogin(ctx context.Context, base string, open bool) (string, error) {
	c := newClient(base, "")
	var s struct {
		DeviceCode      string `json:"device_code"`
		UserCode        string `json:"user_code"`
		VerificationURI string `json:"verification_uri"`
		ExpiresIn       int    `json:"expires_in"`
		Interval        int    `json:"interval"`
	}
	if err := c.postJSON(ctx, "/api/auth/cli/sessions", map[string]any{"key_name": "yuxi CLI"}, &s); err != nil {
		return "", err
	}
	link := s.VerificationURI
	if strings.HasPrefix(link, "/") {
		link = base + link
	}
	link += "?user_code=" + url.QueryEscape(s.UserCode)
	fmt.Fprintf(a.env.Stderr, "Open %s and approve the code %s\n", link, s.UserCode)
	if open {
		openBrowser(link)
	}
	interval := time.Duration(max(s.Interval, 1)) * time.Second
	deadline := time.Now().Add(time.Duration(s.ExpiresIn) * time.Second)
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval):
		}
		var tok struct {
			Secret string `json:"secret"`
		}
		err := c.postJSON(ctx, "/api/auth/cli/sessions/token", map[string]string{"device_code": s.DeviceCode}, &tok)
		var ae *apiError
		switch {
		case err == nil:
			return tok.Secret, nil
		case errors.As(err, &ae) && ae.Code == "authorization_pending" && time.Now().Before(deadline):
			continue
		case errors.As(err, &ae) && ae.Code == "slow_down":
			interval += 5 * time.Second
			continue
		}
		return "", err
	}
}

// openBrowser tries the platform's opener; failing is fine (the address
// was printed).
func openBrowser(link string) {
	name := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		_ = exec.Command("rundll32", "url.dll,FileProtocolHandler", link).Start()
		return
	}
	_ = exec.Command(name, link).Start()
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
