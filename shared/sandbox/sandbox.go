// Package sandbox is the client functions use to reach the sandbox
// provisioner (infra/sandbox-provisioner): create or reuse the sandbox of a
// (file thread, skills thread, uid) scope, run commands in it, and read and
// write the scope's files (served from the provisioner's volume without
// starting a sandbox). Callers hold only the provisioner's URL and token
// (SANDBOX_PROVISIONER_URL, SANDBOX_PROVISIONER_TOKEN, read by their main);
// they never learn a sandbox's address.
//
// Errors the provisioner answers come back as failure.Error with its code
// (path_not_allowed, read_only, not_found, file_too_large, exists, …) so an
// HTTP edge can pass them through; a provisioner that cannot be reached
// (restarting, killed mid-call) is failure code sandbox_unavailable,
// retryable for reads, and for exec a clear failure — exec is not retried
// by this client because a command may not be idempotent.
//
// Imported by: functions that use sandboxes, the local runner and tests.
// May import: shared/failure and the standard library.
package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Paths inside every sandbox.
const (
	UserDataDir  = "/home/gem/user-data"
	WorkspaceDir = "/home/gem/user-data/workspace"
	UploadsDir   = "/home/gem/user-data/uploads"
	OutputsDir   = "/home/gem/user-data/outputs"
	SkillsDir    = "/home/gem/skills"
	MaxOutput    = 262144 // exec output cap (bytes), as the original's SANDBOX_MAX_OUTPUT_BYTES default
)

// MinTokenLen is the shortest token the provisioner accepts.
const MinTokenLen = 32

// Scope names a sandbox and its files: the user, the thread whose
// uploads/outputs it sees, and the thread whose skills it sees (defaults
// to FileThread). A scope with no thread is the user's workspace alone:
// file calls see only /home/gem/user-data/workspace (no sandbox runs).
type Scope struct {
	UID          string `json:"uid"`
	FileThread   string `json:"file_thread_id"`
	SkillsThread string `json:"skills_thread_id,omitempty"`
}

// scopeID is the provisioner's pattern for uid and thread ids.
var scopeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// mappedID is the shape of a mapped thread id.
var mappedID = regexp.MustCompile(`^t-[0-9a-f]{40}$`)

// ThreadScope is the scope of uid's thread threadID. A thread id the
// provisioner's id pattern refuses (a caller-chosen id of the invocation
// entries: "chat:42", spaces, non-ASCII, the reserved "shared") is mapped
// to the stable id "t-<sha256 of it>"; every other id is kept as it is, so
// existing threads keep their files. Every place that turns a thread into
// a scope (the tools, the file routes, the skills) goes through here.
func ThreadScope(uid, threadID string) Scope {
	return Scope{UID: uid, FileThread: FileThreadID(threadID)}
}

// FileThreadID is the provisioner's id of thread threadID's files.
// An id shaped like a mapped one is mapped too, so no kept id can equal the
// mapped id of another thread (the volume's thread directories are not per
// user: a caller choosing "t-<hash of someone's thread id>" must not land
// in that thread's files).
func FileThreadID(threadID string) string {
	if threadID == "" || (scopeID.MatchString(threadID) && threadID != "shared" && !mappedID.MatchString(threadID)) {
		return threadID
	}
	sum := sha256.Sum256([]byte(threadID))
	return "t-" + hex.EncodeToString(sum[:20])
}

func (s Scope) query() url.Values {
	q := url.Values{"uid": {s.UID}}
	if s.FileThread != "" {
		q.Set("file_thread_id", s.FileThread)
	}
	if s.SkillsThread != "" {
		q.Set("skills_thread_id", s.SkillsThread)
	}
	return q
}

// Client talks to one provisioner. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client

	mu  sync.Mutex
	ids map[Scope]string // scope -> sandbox id, learned from Ensure
}

// New returns a client for the provisioner at baseURL. hc nil uses a
// client without an overall timeout (exec calls last as long as their
// command; contexts bound them).
func New(baseURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("SANDBOX_PROVISIONER_URL %q is not an http(s) URL", baseURL)
	}
	if len(token) < MinTokenLen {
		return nil, fmt.Errorf("SANDBOX_PROVISIONER_TOKEN must be at least %d characters", MinTokenLen)
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc, ids: map[Scope]string{}}, nil
}

// Errors of the client itself.
var (
	ErrUnavailable = failure.New(failure.KindUnavailable, "sandbox_unavailable", "the sandbox provisioner is unreachable")
	ErrNotFound    = failure.NotFound("not_found", "no such file or directory")
)

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func kindOf(status int) failure.Kind {
	switch status {
	case http.StatusBadRequest:
		return failure.KindInvalid
	case http.StatusUnauthorized:
		return failure.KindUnauthorized
	case http.StatusForbidden:
		return failure.KindForbidden
	case http.StatusNotFound:
		return failure.KindNotFound
	case http.StatusConflict:
		return failure.KindConflict
	case http.StatusRequestEntityTooLarge:
		return failure.KindTooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return failure.KindUnavailable
	}
	return failure.KindInternal
}

// do sends a request and returns the response (2xx) or a coded error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s %s: %v", ErrUnavailable, method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e apiError
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
		e.Error.Code, e.Error.Message = "sandbox_failed", fmt.Sprintf("provisioner answered %d: %s", resp.StatusCode, bytes.TrimSpace(data))
	}
	return nil, failure.New(kindOf(resp.StatusCode), e.Error.Code, "%s", e.Error.Message)
}

func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, q, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w: decode %s answer: %v", ErrUnavailable, path, err)
	}
	return nil
}

// Health is GET /health.
type Health struct {
	Status      string `json:"status"`
	Backend     string `json:"backend"`
	IdleTimeout int    `json:"idle_timeout"`
}

// Health asks the provisioner's health (no token needed, sent anyway).
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.doJSON(ctx, http.MethodGet, "/health", nil, nil, &h)
	return h, err
}

// Sandbox is a created or reused sandbox.
type Sandbox struct {
	ID      string `json:"sandbox_id"`
	Backend string `json:"backend"`
	Status  string `json:"status"`
}

// Ensure creates or reuses the scope's sandbox with the user's agent env
// (merged over the provisioner's global sandbox env).
func (c *Client) Ensure(ctx context.Context, s Scope, env map[string]string) (Sandbox, error) {
	var sb Sandbox
	in := struct {
		Scope
		Env map[string]string `json:"env,omitempty"`
	}{s, env}
	if err := c.doJSON(ctx, http.MethodPost, "/api/sandboxes", nil, in, &sb); err != nil {
		return Sandbox{}, err
	}
	c.mu.Lock()
	c.ids[s] = sb.ID
	c.mu.Unlock()
	return sb, nil
}

// Delete destroys a sandbox (its files stay on the volume).
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/api/sandboxes/"+url.PathEscape(id), nil, nil, nil)
}

// ExecRequest is one shell command.
type ExecRequest struct {
	Command string            `json:"command"`
	Workdir string            `json:"workdir,omitempty"` // default /home/gem/user-data/workspace
	Timeout time.Duration     `json:"-"`                 // default and cap: the provisioner's SANDBOX_EXEC_TIMEOUT_SECONDS
	Env     map[string]string `json:"env,omitempty"`     // per-call additions
	// IdempotencyKey (a tool call id): the provisioner runs a key once and
	// answers repeats with the first result (kept for an hour).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ExecResult is a finished command: output is stdout and stderr
// interleaved, capped at 262144 bytes (Truncated when more was written).
type ExecResult struct {
	Output    string `json:"output"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
}

// Exec runs a command in the scope's sandbox, creating it (with env) when
// this client has not yet, and once more when the provisioner no longer
// knows it (restarted). A non-zero exit is a result, not an error.
func (c *Client) Exec(ctx context.Context, s Scope, env map[string]string, r ExecRequest) (ExecResult, error) {
	body := struct {
		ExecRequest
		TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	}{r, r.Timeout.Seconds()}
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		id := c.ids[s]
		c.mu.Unlock()
		if id == "" {
			sb, err := c.Ensure(ctx, s, env)
			if err != nil {
				return ExecResult{}, err
			}
			id = sb.ID
		}
		var res ExecResult
		err := c.doJSON(ctx, http.MethodPost, "/api/sandboxes/"+url.PathEscape(id)+"/exec", nil, body, &res)
		if fe, ok := failure.As(err); ok && fe.Code == "sandbox_not_found" && attempt == 0 {
			c.mu.Lock()
			delete(c.ids, s)
			c.mu.Unlock()
			continue
		}
		return res, err
	}
}

// ReadFile reads a file by its sandbox path (absolute under /home/gem, or
// relative to /home/gem/user-data). maxBytes > 0 reads at most that much
// (truncated reports a longer file); 0 reads the whole file up to the
// provisioner's file limit (file_too_large beyond).
func (c *Client) ReadFile(ctx context.Context, s Scope, path string, maxBytes int64) (data []byte, size int64, truncated bool, err error) {
	q := s.query()
	q.Set("path", path)
	if maxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(maxBytes, 10))
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/files", q, nil, "")
	if err != nil {
		return nil, 0, false, err
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, false, fmt.Errorf("%w: read %s: %v", ErrUnavailable, path, err)
	}
	size, _ = strconv.ParseInt(resp.Header.Get("X-File-Size"), 10, 64)
	return data, size, resp.Header.Get("X-Truncated") == "true", nil
}

// WriteFile creates or replaces a file in workspace, uploads or outputs
// (parents created); exclusive fails with code "exists" when it exists.
func (c *Client) WriteFile(ctx context.Context, s Scope, path string, data []byte, exclusive bool) (int64, error) {
	q := s.query()
	q.Set("path", path)
	if exclusive {
		q.Set("exclusive", "1")
	}
	resp, err := c.do(ctx, http.MethodPut, "/api/files", q, bytes.NewReader(data), "application/octet-stream")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Size int64 `json:"size"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("%w: decode write answer: %v", ErrUnavailable, err)
	}
	return out.Size, nil
}

// SkillDir is one skill written into a scope's read-only skills directory.
type SkillDir struct {
	Slug  string      `json:"slug"`
	Hash  string      `json:"hash"`
	Files []SkillFile `json:"files"`
}

// SkillFile is one file of a skill, its path relative to the skill.
type SkillFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// SyncSkills makes the scope's /home/gem/skills hold exactly skills (a
// skill whose hash the provisioner already has is not rewritten).
func (c *Client) SyncSkills(ctx context.Context, s Scope, skills []SkillDir) error {
	if skills == nil {
		skills = []SkillDir{}
	}
	return c.doJSON(ctx, http.MethodPut, "/api/skills", s.query(), map[string]any{"skills": skills}, nil)
}

// Delete removes a file or symlink; recursive removes a directory tree.
func (c *Client) DeleteFile(ctx context.Context, s Scope, path string, recursive bool) error {
	q := s.query()
	q.Set("path", path)
	if recursive {
		q.Set("recursive", "1")
	}
	return c.doJSON(ctx, http.MethodDelete, "/api/files", q, nil, nil)
}

// Mkdir creates a directory and its parents.
func (c *Client) Mkdir(ctx context.Context, s Scope, path string) error {
	q := s.query()
	q.Set("path", path)
	return c.doJSON(ctx, http.MethodPost, "/api/files/mkdir", q, nil, nil)
}

// Entry is a file or directory by its sandbox path.
type Entry struct {
	Path    string    `json:"path"`
	Name    string    `json:"name"`
	IsDir   bool      `json:"is_dir"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
}

// Stat describes a path.
func (c *Client) Stat(ctx context.Context, s Scope, path string) (Entry, error) {
	q := s.query()
	q.Set("path", path)
	var e Entry
	err := c.doJSON(ctx, http.MethodGet, "/api/files/stat", q, nil, &e)
	return e, err
}

// List lists a directory to depth levels, directories first.
func (c *Client) List(ctx context.Context, s Scope, path string, depth int) ([]Entry, bool, error) {
	q := s.query()
	q.Set("path", path)
	q.Set("depth", strconv.Itoa(depth))
	var out struct {
		Entries   []Entry `json:"entries"`
		Truncated bool    `json:"truncated"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/api/files/list", q, nil, &out)
	return out.Entries, out.Truncated, err
}

// Glob matches paths below dir ("" = /home/gem/user-data) against a
// relative pattern ("**/*.py").
func (c *Client) Glob(ctx context.Context, s Scope, dir, pattern string) ([]string, bool, error) {
	q := s.query()
	q.Set("path", dir)
	q.Set("pattern", pattern)
	var out struct {
		Paths     []string `json:"paths"`
		Truncated bool     `json:"truncated"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/api/files/glob", q, nil, &out)
	return out.Paths, out.Truncated, err
}

// Match is one grep hit.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Grep searches text files below dir (or one file) for a regular
// expression; glob filters file names.
func (c *Client) Grep(ctx context.Context, s Scope, dir, pattern, glob string, max int) ([]Match, bool, error) {
	q := s.query()
	q.Set("path", dir)
	q.Set("pattern", pattern)
	if glob != "" {
		q.Set("glob", glob)
	}
	if max > 0 {
		q.Set("max", strconv.Itoa(max))
	}
	var out struct {
		Matches   []Match `json:"matches"`
		Truncated bool    `json:"truncated"`
	}
	err := c.doJSON(ctx, http.MethodGet, "/api/files/grep", q, nil, &out)
	return out.Matches, out.Truncated, err
}

// IsCode reports whether err is a provisioner error with that code.
func IsCode(err error, code string) bool {
	fe, ok := failure.As(err)
	return ok && fe.Code == code
}

// Archive writes a directory of the scope as a zip to w (the provisioner
// bounds its size: file_too_large beyond).
func (c *Client) Archive(ctx context.Context, s Scope, path string, w io.Writer) error {
	q := s.query()
	q.Set("path", path)
	resp, err := c.do(ctx, http.MethodGet, "/api/files/archive", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("%w: archive %s: %v", ErrUnavailable, path, err)
	}
	return nil
}

// ProjectsDir holds the users' project working folders: a project's folder
// is ProjectsDir/<project id> in its owner's workspace, on the
// provisioner's volume — every sandbox of the owner sees it there (the
// workspace is mounted per user), and the viewer reads it without a sandbox.
const ProjectsDir = WorkspaceDir + "/projects"

// ProjectDir is the sandbox path of project id's working folder.
func ProjectDir(id string) string { return ProjectsDir + "/" + id }

// ProjectFolders makes and removes projects' working folders through the
// provisioner's authenticated API (functions never mount the volume). It
// is shared/thread's ProjectFolders.
type ProjectFolders struct{ Client *Client }

// CreateProjectFolder makes uid's folder of project id (an existing one is kept).
func (f ProjectFolders) CreateProjectFolder(ctx context.Context, uid, id string) error {
	return f.Client.Mkdir(ctx, Scope{UID: uid}, ProjectDir(id))
}

// RemoveProjectFolder removes uid's folder of project id and everything in
// it; a folder already gone is no error.
func (f ProjectFolders) RemoveProjectFolder(ctx context.Context, uid, id string) error {
	err := f.Client.DeleteFile(ctx, Scope{UID: uid}, ProjectDir(id), true)
	if IsCode(err, "not_found") {
		return nil
	}
	return err
}
