// Package sandboxtool is the agent's file-system and sandbox tools:
// read_file, write_file, edit_file, ls, glob, grep, present_artifacts,
// ocr_parse_file (category filesystem) and execute (category sandbox). Every call works on the run's scope — the
// calling user and the run's thread (its uploads/outputs, the user's
// workspace, the thread's skills) — through the sandbox provisioner's API
// (shared/sandbox): file tools never start a sandbox, execute runs in it.
// Paths are sandbox paths (/home/gem/user-data/…, or relative to it); only
// workspace, uploads and outputs are writable, `..` and symlink escapes are
// refused by the provisioner.
//
// Idempotent by tool call id where they write (tool calls are delivered
// at least once): execute passes the id as the provisioner's idempotency
// key; write_file accepts a replay that finds its own content already
// written; edit_file accepts a replay that finds the replacement done.
//
// Imported by: the tool registry wiring (tool-invoke's and agent-step's
// mains, infra/local). May import: shared/sandbox, shared/tool,
// shared/failure and the standard library.
package sandboxtool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/sandbox"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Limits of the tools.
const (
	DefaultReadLines = 500
	MaxLineChars     = 2000
	MaxReadBytes     = 10 << 20 // a text file read by read_file
	MaxWriteBytes    = 10 << 20 // content of write_file / edit_file
	MaxListEntries   = 1000
	MaxGrepMatches   = 200
)

// LargeResultsDir is where results too large for the model's context are
// offloaded (the original's outputs/large_tool_results).
const LargeResultsDir = sandbox.OutputsDir + "/large_tool_results"

// Client is the part of the provisioner client the tools use.
type Client interface {
	ReadFile(ctx context.Context, s sandbox.Scope, path string, maxBytes int64) ([]byte, int64, bool, error)
	WriteFile(ctx context.Context, s sandbox.Scope, path string, data []byte, exclusive bool) (int64, error)
	List(ctx context.Context, s sandbox.Scope, path string, depth int) ([]sandbox.Entry, bool, error)
	Glob(ctx context.Context, s sandbox.Scope, dir, pattern string) ([]string, bool, error)
	Grep(ctx context.Context, s sandbox.Scope, dir, pattern, glob string, max int) ([]sandbox.Match, bool, error)
	Exec(ctx context.Context, s sandbox.Scope, env map[string]string, r sandbox.ExecRequest) (sandbox.ExecResult, error)
	Stat(ctx context.Context, s sandbox.Scope, path string) (sandbox.Entry, error)
}

// Config of the tools.
type Config struct {
	ExecTimeout time.Duration // SANDBOX_EXEC_TIMEOUT_SECONDS: the default and largest timeout of execute (180s)
	// Env returns the user's agent environment (/api/user/agent-env),
	// injected when the user's sandbox is created; nil: none.
	Env func(ctx context.Context, uid string) (map[string]string, error)
	// Prepare runs before each tool call (the run's skills are written into
	// /home/gem/skills); its error is retried like an unreachable provisioner.
	Prepare func(ctx context.Context, c tool.Call) error
	// Artifacts keeps what present_artifacts presents on the thread; nil:
	// the call answers but nothing is recorded.
	Artifacts ArtifactRecorder
	// Parse is ocr_parse_file's document parser and OCREngine the id of its
	// configured OCR engine ("" for none); nil: the tool says no parser is configured.
	Parse     Parse
	OCREngine string
	// UnavailableWait is how long a call retries a provisioner that does not
	// answer (sandbox_unavailable: restarting, killed mid-call) before the
	// model gets a sandbox_unavailable tool error and the run goes on
	// (default 60s; it must stay below YUXI_TOOL_TIMEOUT minus the exec timeout).
	UnavailableWait time.Duration
}

// New returns the nine tools on c.
func New(c Client, cfg Config) []tool.Tool {
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 180 * time.Second
	}
	ts := []tool.Tool{readFile{c}, writeFile{c}, editFile{c}, ls{c}, globTool{c}, grepTool{c}, execute{c, cfg}, presentArtifacts{c, cfg.Artifacts}, ocrParseFile{c, cfg.Parse, cfg.OCREngine}}
	if cfg.UnavailableWait <= 0 {
		cfg.UnavailableWait = 60 * time.Second
	}
	for i, t := range ts {
		if cfg.Prepare != nil {
			t = prepared{t, cfg.Prepare}
		}
		ts[i] = patient{t, cfg.UnavailableWait}
	}
	return ts
}

// patient retries a call whose provisioner does not answer for up to wait
// (a restart takes seconds; the call is idempotent by tool call id), then
// answers the model a sandbox_unavailable tool error: a provisioner that
// never comes back fails the call clearly instead of holding the run in
// redeliveries until the recovery sweep gives up on it.
type patient struct {
	tool.Tool
	wait time.Duration
}

func (p patient) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	deadline := time.Now().Add(p.wait)
	delay := 200 * time.Millisecond
	for {
		res, err := p.Tool.Invoke(ctx, c)
		if err == nil || !sandbox.IsCode(err, "sandbox_unavailable") || ctx.Err() != nil {
			return res, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return tool.Errorf(fmt.Sprintf("sandbox_unavailable: the sandbox provisioner did not answer for %s, so %s did not complete (%v). "+
				"Tell the user the sandbox is unavailable, or go on without it.", p.wait, p.Spec().Name, err)), nil
		}
		select {
		case <-time.After(min(delay, left)):
		case <-ctx.Done():
			return res, err
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// prepared runs Config.Prepare before its tool.
type prepared struct {
	tool.Tool
	prepare func(ctx context.Context, c tool.Call) error
}

func (p prepared) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	if err := p.prepare(ctx, c); err != nil {
		return tool.Result{}, fmt.Errorf("prepare the sandbox's skills: %w", err)
	}
	return p.Tool.Invoke(ctx, c)
}

// Specs are the tools' specs, for a process that only offers them.
func Specs() []tool.Spec {
	var out []tool.Spec
	for _, t := range New(nil, Config{}) {
		out = append(out, t.Spec())
	}
	return out
}

func scopeOf(c tool.Call) sandbox.Scope {
	return sandbox.ThreadScope(c.UID, c.ThreadID)
}

func decode(c tool.Call, v any) *tool.Result {
	dec := json.NewDecoder(strings.NewReader(c.Arguments))
	if err := dec.Decode(v); err != nil {
		r := tool.Errorf("invalid arguments: " + err.Error())
		return &r
	}
	return nil
}

// result turns a provisioner error into what the model sees: coded errors
// (bad path, read-only, not found, too large) are tool results; an
// unreachable provisioner is returned as an error so the call is retried.
func result(err error) (tool.Result, error) {
	if fe, ok := failure.As(err); ok && fe.Kind != failure.KindUnavailable && fe.Kind != failure.KindInternal && fe.Kind != failure.KindUnauthorized {
		return tool.Errorf(fe.Code + ": " + fe.Message), nil
	}
	return tool.Result{}, err
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// ---- read_file

type readFile struct{ c Client }

func (readFile) Spec() tool.Spec {
	return tool.Spec{Name: "read_file", DisplayName: "Read file", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Read a text file from the sandbox file system. Lines come numbered (cat -n format), starting at line offset+1, at most limit lines; " +
			"lines longer than 2000 characters are cut. Paths: /home/gem/user-data/{workspace,uploads,outputs}/… or /home/gem/skills/…, or relative to /home/gem/user-data. " +
			"PDF, Office and image files are not text: use ocr_parse_file for them.",
		Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string","description":"sandbox path of the file"},` +
			`"offset":{"type":"integer","minimum":0,"description":"line to start after (0 = from the first line)"},` +
			`"limit":{"type":"integer","minimum":1,"description":"most lines to return (default 500)"}},"required":["file_path"],"additionalProperties":false}`)}
}

var binaryExt = map[string]bool{".pdf": true, ".doc": true, ".docx": true, ".xls": true, ".xlsx": true, ".ppt": true, ".pptx": true,
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".bmp": true, ".tif": true, ".tiff": true}

func (t readFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		FilePath string `json:"file_path"`
		Offset   int    `json:"offset"`
		Limit    int    `json:"limit"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.FilePath == "" || a.Offset < 0 || a.Limit < 0 {
		return tool.Errorf("file_path is required; offset and limit are non-negative"), nil
	}
	if a.Limit == 0 {
		a.Limit = DefaultReadLines
	}
	if ext := strings.ToLower(path.Ext(a.FilePath)); binaryExt[ext] {
		return tool.Result{Output: fmt.Sprintf("%s is a %s file, not text: call ocr_parse_file with this path to get its Markdown, then read that.", a.FilePath, ext)}, nil
	}
	data, _, _, err := t.c.ReadFile(ctx, scopeOf(c), a.FilePath, 0)
	if err != nil {
		return result(err)
	}
	if len(data) > MaxReadBytes {
		return tool.Errorf(fmt.Sprintf("%s is %d bytes; read_file reads text files up to %d bytes (use grep or execute with head/sed)", a.FilePath, len(data), MaxReadBytes)), nil
	}
	if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 || !utf8.Valid(data) {
		return tool.Result{Output: fmt.Sprintf("%s is not UTF-8 text: use ocr_parse_file for documents and images, or execute for other formats.", a.FilePath)}, nil
	}
	if len(data) == 0 {
		return tool.Result{Output: "(the file is empty)"}, nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if a.Offset >= len(lines) {
		return tool.Errorf(fmt.Sprintf("offset %d is past the end of the file (%d lines)", a.Offset, len(lines))), nil
	}
	end := min(len(lines), a.Offset+a.Limit)
	var b strings.Builder
	for i := a.Offset; i < end; i++ {
		line := lines[i]
		if len(line) > MaxLineChars {
			line = line[:MaxLineChars] + "…"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, line)
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "… (%d more lines; read on with offset %d)\n", len(lines)-end, end)
	}
	return tool.Result{Output: b.String()}, nil
}

// ---- write_file

type writeFile struct{ c Client }

func (writeFile) Spec() tool.Spec {
	return tool.Spec{Name: "write_file", DisplayName: "Write file", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Create a new file with the given content in /home/gem/user-data/{workspace,uploads,outputs} (parents are created). " +
			"Refuses an existing file: read it and use edit_file instead, or choose a new path. Put results for the user in outputs/.",
		Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string","description":"sandbox path of the new file"},` +
			`"content":{"type":"string","description":"the whole content"}},"required":["file_path","content"],"additionalProperties":false}`)}
}

func (t writeFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		FilePath string `json:"file_path"`
		Content  string `json:"content"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.FilePath == "" || len(a.Content) > MaxWriteBytes {
		return tool.Errorf(fmt.Sprintf("file_path is required and content at most %d bytes", MaxWriteBytes)), nil
	}
	n, err := t.c.WriteFile(ctx, scopeOf(c), a.FilePath, []byte(a.Content), true)
	if sandbox.IsCode(err, "exists") {
		// A redelivered call whose first delivery wrote the file: the same
		// content means done.
		if cur, _, _, rerr := t.c.ReadFile(ctx, scopeOf(c), a.FilePath, int64(len(a.Content))+1); rerr == nil && string(cur) == a.Content {
			return tool.Result{Output: fmt.Sprintf("Wrote %d bytes to %s", len(a.Content), a.FilePath)}, nil
		}
		return tool.Errorf(fmt.Sprintf("cannot write to %s because it already exists: read it and use edit_file, or write to a new path", a.FilePath)), nil
	}
	if err != nil {
		return result(err)
	}
	return tool.Result{Output: fmt.Sprintf("Wrote %d bytes to %s", n, a.FilePath)}, nil
}

// ---- edit_file

type editFile struct{ c Client }

func (editFile) Spec() tool.Spec {
	return tool.Spec{Name: "edit_file", DisplayName: "Edit file", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Replace an exact string in a file. old_string must occur exactly once unless replace_all is true; " +
			"include enough surrounding text to make it unique. Read the file first.",
		Parameters: schema(`{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string","description":"exact text to replace"},` +
			`"new_string":{"type":"string","description":"replacement text"},"replace_all":{"type":"boolean","description":"replace every occurrence"}},` +
			`"required":["file_path","old_string","new_string"],"additionalProperties":false}`)}
}

func (t editFile) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		FilePath   string `json:"file_path"`
		OldString  string `json:"old_string"`
		NewString  string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.FilePath == "" || a.OldString == "" {
		return tool.Errorf("file_path and a non-empty old_string are required"), nil
	}
	if a.OldString == a.NewString {
		return tool.Errorf("old_string and new_string are the same"), nil
	}
	data, _, _, err := t.c.ReadFile(ctx, scopeOf(c), a.FilePath, 0)
	if err != nil {
		return result(err)
	}
	text := string(data)
	n := strings.Count(text, a.OldString)
	switch {
	case n == 0 && a.NewString != "" && strings.Contains(text, a.NewString):
		// A redelivered call whose first delivery made the edit.
		return tool.Result{Output: fmt.Sprintf("Edited %s (the replacement is in place)", a.FilePath)}, nil
	case n == 0:
		return tool.Errorf(fmt.Sprintf("old_string not found in %s", a.FilePath)), nil
	case n > 1 && !a.ReplaceAll:
		return tool.Errorf(fmt.Sprintf("old_string occurs %d times in %s: add context to make it unique, or set replace_all", n, a.FilePath)), nil
	}
	if a.ReplaceAll {
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
	} else {
		text = strings.Replace(text, a.OldString, a.NewString, 1)
	}
	if len(text) > MaxWriteBytes {
		return tool.Errorf(fmt.Sprintf("the edited file would be over %d bytes", MaxWriteBytes)), nil
	}
	if _, err := t.c.WriteFile(ctx, scopeOf(c), a.FilePath, []byte(text), false); err != nil {
		return result(err)
	}
	if a.ReplaceAll {
		return tool.Result{Output: fmt.Sprintf("Replaced %d occurrences in %s", n, a.FilePath)}, nil
	}
	return tool.Result{Output: fmt.Sprintf("Edited %s", a.FilePath)}, nil
}

// ---- ls

type ls struct{ c Client }

func (ls) Spec() tool.Spec {
	return tool.Spec{Name: "ls", DisplayName: "List directory", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "List a directory of the sandbox file system (default /home/gem/user-data): directories end with /, files show their size.",
		Parameters:  schema(`{"type":"object","properties":{"path":{"type":"string","description":"sandbox directory"}},"additionalProperties":false}`)}
}

func (t ls) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Path string `json:"path"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.Path == "" {
		a.Path = sandbox.UserDataDir
	}
	entries, truncated, err := t.c.List(ctx, scopeOf(c), a.Path, 1)
	if err != nil {
		return result(err)
	}
	if len(entries) == 0 {
		return tool.Result{Output: "(empty directory)"}, nil
	}
	var b strings.Builder
	for i, e := range entries {
		if i == MaxListEntries {
			truncated = true
			break
		}
		if e.IsDir {
			fmt.Fprintf(&b, "%s/\n", e.Path)
		} else {
			fmt.Fprintf(&b, "%s (%d bytes)\n", e.Path, e.Size)
		}
	}
	if truncated {
		b.WriteString("… (more entries not shown)\n")
	}
	return tool.Result{Output: b.String()}, nil
}

// ---- glob

type globTool struct{ c Client }

func (globTool) Spec() tool.Spec {
	return tool.Spec{Name: "glob", DisplayName: "Find files", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Find paths matching a glob pattern relative to path (default /home/gem/user-data); ** matches any number of directories, e.g. **/*.py.",
		Parameters: schema(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"directory to search below"}},` +
			`"required":["pattern"],"additionalProperties":false}`)}
}

func (t globTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.Pattern == "" {
		return tool.Errorf("pattern is required"), nil
	}
	paths, truncated, err := t.c.Glob(ctx, scopeOf(c), a.Path, a.Pattern)
	if err != nil {
		return result(err)
	}
	if len(paths) == 0 {
		return tool.Result{Output: "No files match " + a.Pattern}, nil
	}
	if len(paths) > MaxListEntries {
		paths, truncated = paths[:MaxListEntries], true
	}
	out := strings.Join(paths, "\n") + "\n"
	if truncated {
		out += "… (more matches not shown)\n"
	}
	return tool.Result{Output: out}, nil
}

// ---- grep

type grepTool struct{ c Client }

func (grepTool) Spec() tool.Spec {
	return tool.Spec{Name: "grep", DisplayName: "Search file contents", Category: "filesystem", Tags: []string{"sandbox"}, Base: true,
		Description: "Search text files for a regular expression (RE2 syntax) below path (a directory or one file; default /home/gem/user-data), " +
			"optionally only files whose name matches glob. output_mode: files_with_matches (default), content (path:line: text) or count.",
		Parameters: schema(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"glob":{"type":"string"},` +
			`"output_mode":{"type":"string","enum":["files_with_matches","content","count"]}},"required":["pattern"],"additionalProperties":false}`)}
}

func (t grepTool) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Pattern    string `json:"pattern"`
		Path       string `json:"path"`
		Glob       string `json:"glob"`
		OutputMode string `json:"output_mode"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if a.Pattern == "" {
		return tool.Errorf("pattern is required"), nil
	}
	matches, truncated, err := t.c.Grep(ctx, scopeOf(c), a.Path, a.Pattern, a.Glob, MaxGrepMatches)
	if err != nil {
		return result(err)
	}
	if len(matches) == 0 {
		return tool.Result{Output: "No matches for " + a.Pattern}, nil
	}
	var b strings.Builder
	switch a.OutputMode {
	case "content":
		for _, m := range matches {
			fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, m.Text)
		}
	case "count":
		counts, order := map[string]int{}, []string{}
		for _, m := range matches {
			if counts[m.Path] == 0 {
				order = append(order, m.Path)
			}
			counts[m.Path]++
		}
		for _, p := range order {
			fmt.Fprintf(&b, "%s: %d\n", p, counts[p])
		}
	case "", "files_with_matches":
		seen := map[string]bool{}
		for _, m := range matches {
			if !seen[m.Path] {
				seen[m.Path] = true
				fmt.Fprintln(&b, m.Path)
			}
		}
	default:
		return tool.Errorf("output_mode is files_with_matches, content or count"), nil
	}
	if truncated {
		fmt.Fprintf(&b, "… (stopped at %d matches)\n", MaxGrepMatches)
	}
	return tool.Result{Output: b.String()}, nil
}

// ---- execute

type execute struct {
	c   Client
	cfg Config
}

func (execute) Spec() tool.Spec {
	return tool.Spec{Name: "execute", DisplayName: "Run command", Category: "sandbox", Tags: []string{"sandbox"}, Base: true,
		Description: "Run a shell command (/bin/sh -c) in the conversation's sandbox. The working directory is /home/gem/user-data, so relative paths " +
			"resolve as in the file tools: outputs/… (results for the user), uploads/… (the user's files), workspace/… (the user's shared workspace); skills are in /home/gem/skills (read-only). " +
			"No network. Output (stdout and stderr) is capped at 262144 bytes; the exit code is returned. timeout is in seconds (default and maximum: the sandbox exec timeout).",
		Parameters: schema(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","minimum":1,"description":"seconds"}},` +
			`"required":["command"],"additionalProperties":false}`)}
}

func (t execute) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var a struct {
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}
	if r := decode(c, &a); r != nil {
		return *r, nil
	}
	if strings.TrimSpace(a.Command) == "" {
		return tool.Errorf("command is required"), nil
	}
	timeout := t.cfg.ExecTimeout
	if a.Timeout > 0 && time.Duration(a.Timeout)*time.Second < timeout {
		timeout = time.Duration(a.Timeout) * time.Second
	}
	var env map[string]string
	if t.cfg.Env != nil {
		var err error
		if env, err = t.cfg.Env(ctx, c.UID); err != nil {
			return tool.Result{}, fmt.Errorf("agent env of %s: %w", c.UID, err)
		}
	}
	res, err := t.c.Exec(ctx, scopeOf(c), env, sandbox.ExecRequest{Command: a.Command, Workdir: sandbox.UserDataDir, Timeout: timeout, IdempotencyKey: c.ToolCallID})
	if err != nil {
		return result(err)
	}
	var b strings.Builder
	b.WriteString(res.Output)
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		b.WriteString("\n")
	}
	if res.Truncated {
		b.WriteString("[output truncated at 262144 bytes]\n")
	}
	if res.TimedOut {
		fmt.Fprintf(&b, "[command timed out after %s and was killed]\n", timeout)
	}
	fmt.Fprintf(&b, "[exit code %d]", res.ExitCode)
	return tool.Result{Output: b.String(), IsError: res.TimedOut}, nil
}
