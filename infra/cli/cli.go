// Package cli is the `yuxi` command line: remotes (add, use, ping, list),
// login with an API key, whoami, status, logout, a local chat page that
// proxies an agent with the stored key (chat), and knowledge bases (list,
// query, open and find in a document, upload of files and directories — resumable by content hash, with
// a bounded number of uploads in flight), and agent evaluation (a stored
// suite, or a local JSONL of samples through the blocking eval route). Login takes an API key or runs
// the device-code flow with a browser. Configuration lives in
// ~/.yuxi/config.toml (0600). Errors are one line on stderr and a non-zero
// exit; --json prints machine-readable output for scripts.
//
// It talks to the platform only over its public HTTP API.
//
// Imported by: infra/cli/cmd/yuxi (main), tests. May import: the standard
// library only.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// Env is what the CLI reads from its process: main fills it.
type Env struct {
	Home   string // the user's home directory (config in Home/.yuxi/config.toml)
	Stdout io.Writer
	Stderr io.Writer
}

// errUsage is a command-line mistake.
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(format string, args ...any) error { return errUsage{fmt.Sprintf(format, args...)} }

const usage = `usage: yuxi [--json] [--remote NAME] <command>

  remote add NAME URL | remote use NAME | remote list | remote ping [NAME]
  login --api-key KEY      store an API key for the remote (checked against it)
  login --browser [--no-open]  sign in with the browser (device code) and store a new API key
  whoami | status | logout
  chat [--agent-slug SLUG] [--no-open] [--port N]
                           a local chat page (127.0.0.1) proxying the agent with the stored key
  kb list
  kb query KB_ID QUERY [--top-k N]
  kb upload KB_ID PATH... [--concurrency 1-300] [--include-ext md,txt,…]
  kb open KB_ID FILE_ID [--offset N] [--limit N]
  kb find KB_ID FILE_ID PATTERN... [--regex] [--case-sensitive]
  agent eval --suite SUITE_ID [--experiment-name NAME] [--timeout-seconds N]
  agent eval --file SAMPLES.jsonl --agent-slug SLUG [--max-concurrency N] [--timeout-seconds N] [--experiment-name NAME]
                           run an evaluation, print each item and a summary; exit 1 when any item failed
`

// app is one invocation.
type app struct {
	env     Env
	json    bool
	remote  string // --remote
	cfgPath string
	cfg     *Config
}

// Run runs the command in args (without the program name) and returns the
// exit status: 0, 1 for a failure, 2 for a usage mistake.
func Run(ctx context.Context, args []string, env Env) int {
	a := &app{env: env, cfgPath: filepath.Join(env.Home, ".yuxi", "config.toml")}
	rest, err := a.globalFlags(args)
	if err == nil {
		a.cfg, err = loadConfig(a.cfgPath)
	}
	if err == nil {
		err = a.dispatch(ctx, rest)
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(env.Stderr, "yuxi:", oneLine(err.Error()))
	var u errUsage
	if errors.As(err, &u) {
		fmt.Fprint(env.Stderr, usage)
		return 2
	}
	return 1
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (a *app) globalFlags(args []string) ([]string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "--json":
			a.json = true
		case arg == "--remote":
			if i+1 >= len(args) {
				return nil, usagef("--remote needs a name")
			}
			i++
			a.remote = args[i]
		case strings.HasPrefix(arg, "--remote="):
			a.remote = strings.TrimPrefix(arg, "--remote=")
		default:
			rest = append(rest, arg)
		}
	}
	return rest, nil
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	sub := func() string {
		if len(args) > 1 {
			return args[1]
		}
		return ""
	}()
	switch args[0] {
	case "remote":
		switch sub {
		case "add":
			return a.remoteAdd(args[2:])
		case "use":
			return a.remoteUse(args[2:])
		case "list":
			return a.remoteList()
		case "ping":
			return a.remotePing(ctx, args[2:])
		}
		return usagef("unknown remote command %q", sub)
	case "login":
		return a.login(ctx, args[1:])
	case "chat":
		return a.chat(ctx, args[1:])
	case "whoami":
		return a.whoami(ctx)
	case "status":
		return a.status(ctx)
	case "logout":
		return a.logout()
	case "kb":
		switch sub {
		case "list":
			return a.kbList(ctx)
		case "query":
			return a.kbQuery(ctx, args[2:])
		case "upload":
			return a.kbUpload(ctx, args[2:])
		case "open":
			return a.kbOpen(ctx, args[2:])
		case "find":
			return a.kbFind(ctx, args[2:])
		}
		return usagef("unknown kb command %q", sub)
	case "agent":
		if sub == "eval" {
			return a.agentEval(ctx, args[2:])
		}
		return usagef("unknown agent command %q", sub)
	case "help", "-h", "--help":
		fmt.Fprint(a.env.Stdout, usage)
		return nil
	}
	return usagef("unknown command %q", args[0])
}

// out prints v as JSON with --json, else text (a line, or rows as a table).
func (a *app) out(v any, text func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 2, 4, 2, ' ', 0)
	text(tw)
	return tw.Flush()
}

// current returns the remote in use (--remote, else the config's current).
func (a *app) current() (string, *Remote, error) {
	name := a.remote
	if name == "" {
		name = a.cfg.Current
	}
	if name == "" {
		return "", nil, errors.New("no remote: add one with `yuxi remote add NAME URL`")
	}
	r, ok := a.cfg.Remotes[name]
	if !ok {
		return "", nil, fmt.Errorf("unknown remote %q (yuxi remote list)", name)
	}
	return name, r, nil
}

// client is a logged-in client of the current remote.
func (a *app) client() (*client, error) {
	name, r, err := a.current()
	if err != nil {
		return nil, err
	}
	if r.APIKey == "" {
		return nil, fmt.Errorf("not logged in to %s: yuxi login --api-key KEY", name)
	}
	return newClient(r.URL, r.APIKey), nil
}

func (a *app) remoteAdd(args []string) error {
	if len(args) != 2 {
		return usagef("remote add NAME URL")
	}
	name, url := args[0], strings.TrimRight(args[1], "/")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return usagef("the URL must start with http:// or https://")
	}
	r := a.cfg.Remotes[name]
	if r == nil {
		r = &Remote{}
		a.cfg.Remotes[name] = r
	}
	if r.URL != url {
		r.URL, r.APIKey = url, "" // a key belongs to its platform
	}
	if a.cfg.Current == "" {
		a.cfg.Current = name
	}
	if err := a.cfg.save(a.cfgPath); err != nil {
		return err
	}
	return a.out(map[string]any{"name": name, "url": url, "current": a.cfg.Current == name}, func(w io.Writer) {
		fmt.Fprintf(w, "added remote %s (%s)\n", name, url)
	})
}

func (a *app) remoteUse(args []string) error {
	if len(args) != 1 {
		return usagef("remote use NAME")
	}
	if _, ok := a.cfg.Remotes[args[0]]; !ok {
		return fmt.Errorf("unknown remote %q (yuxi remote list)", args[0])
	}
	a.cfg.Current = args[0]
	if err := a.cfg.save(a.cfgPath); err != nil {
		return err
	}
	return a.out(map[string]any{"current": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "using remote %s\n", args[0]) })
}

type remoteRow struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Current  bool   `json:"current"`
	LoggedIn bool   `json:"logged_in"`
}

func (a *app) remoteList() error {
	rows := []remoteRow{}
	for n, r := range a.cfg.Remotes {
		rows = append(rows, remoteRow{Name: n, URL: r.URL, Current: n == a.cfg.Current, LoggedIn: r.APIKey != ""})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return a.out(rows, func(w io.Writer) {
		for _, r := range rows {
			mark := " "
			if r.Current {
				mark = "*"
			}
			fmt.Fprintf(w, "%s %s\t%s\t%s\n", mark, r.Name, r.URL, map[bool]string{true: "logged in", false: "-"}[r.LoggedIn])
		}
	})
}

func (a *app) remotePing(ctx context.Context, args []string) error {
	if len(args) > 0 {
		a.remote = args[0]
	}
	name, r, err := a.current()
	if err != nil {
		return err
	}
	ms, err := newClient(r.URL, "").ping(ctx)
	if err != nil {
		return fmt.Errorf("%s (%s) unreachable: %w", name, r.URL, err)
	}
	return a.out(map[string]any{"name": name, "url": r.URL, "ok": true, "latency_ms": ms}, func(w io.Writer) {
		fmt.Fprintf(w, "%s (%s): ok in %.1fms\n", name, r.URL, ms)
	})
}
