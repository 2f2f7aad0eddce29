// Package provisioner is the sandbox provisioner: a standing service that
// creates or reuses one sandbox per (file thread, skills thread, uid) on a
// backend, runs commands in it, reaps idle sandboxes, and serves the
// scope's files straight from its volume without starting a sandbox.
// Functions reach it only through its bearer-token HTTP API (shared/sandbox
// is the client): they never learn a sandbox's own address and the token is
// never put into a sandbox.
//
// Sandboxes hold no state worth keeping: files live on the volume, so a
// reaped or crashed sandbox is recreated on demand with its files, and a
// restarted provisioner destroys the sandboxes its backend still lists
// (Recover) instead of leaking them.
//
// Imported by: its main (infra/sandbox-provisioner/cmd/sandbox-provisioner),
// the local runner and tests. May import: infra/sandbox-provisioner/backend,
// infra/sandbox-provisioner/volume and the standard library.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

// MinTokenLen is the shortest bearer token the provisioner accepts.
const MinTokenLen = 32

// Config of a provisioner; Validate fills defaults.
type Config struct {
	Token         string
	IdleTimeout   time.Duration // SANDBOX_IDLE_TIMEOUT_SECONDS: default 120s, never below ExecTimeout + 30s
	IdleCheck     time.Duration // how often the reaper looks (default IdleTimeout/4, at most 10s)
	ExecTimeout   time.Duration // SANDBOX_EXEC_TIMEOUT_SECONDS: default and largest per-call timeout (180s)
	MaxOutput     int           // exec output cap (262144)
	MaxFileBytes  int64         // largest file written or read whole through the file API (default 64 MiB)
	GlobalEnv     map[string]string
	Limits        backend.Limits
	VolumeDir     string
	SandboxOwner  volume.Owner // owner of user-data dirs; UID -1 leaves ownership alone
	Logger        *slog.Logger
	ListMaxResult int // largest list/glob/grep answer (default 5000)
}

// ErrConfig: a configuration the provisioner refuses to start with.
var ErrConfig = errors.New("sandbox provisioner config")

// Validate fills defaults and refuses unsafe settings.
func (c *Config) Validate() error {
	if len(c.Token) < MinTokenLen {
		return fmt.Errorf("%w: SANDBOX_PROVISIONER_TOKEN must be at least %d characters (got %d)", ErrConfig, MinTokenLen, len(c.Token))
	}
	if c.VolumeDir == "" {
		return fmt.Errorf("%w: no volume directory", ErrConfig)
	}
	if c.ExecTimeout <= 0 {
		c.ExecTimeout = 180 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if min := c.ExecTimeout + 30*time.Second; c.IdleTimeout < min {
		c.IdleTimeout = min
	}
	if c.IdleCheck <= 0 {
		c.IdleCheck = min(c.IdleTimeout/4, 10*time.Second)
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = backend.DefaultOutput
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = 64 << 20
	}
	if c.ListMaxResult <= 0 {
		c.ListMaxResult = 5000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for k, v := range c.GlobalEnv {
		if !envName.MatchString(k) {
			return fmt.Errorf("%w: global sandbox env name %q", ErrConfig, k)
		}
		if v == c.Token {
			return fmt.Errorf("%w: the global sandbox env holds the provisioner token (%s)", ErrConfig, k)
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Provisioner keeps the live sandboxes of one backend.
type Provisioner struct {
	cfg   Config
	be    backend.Backend
	files *volume.Files

	mu    sync.Mutex
	boxes map[string]*box  // by sandbox id: every scope ensured since start
	calls map[string]*call // by sandbox id + idempotency key
}

// call is one keyed exec: done closes when res/err are set.
type call struct {
	done chan struct{}
	res  ExecResult
	err  error
	at   time.Time
}

// callTTL is how long a keyed exec's result is kept.
const callTTL = time.Hour

type box struct {
	spec     backend.Spec
	live     bool // ensured on the backend (false after the reaper destroyed it)
	lastUsed time.Time
	busy     int // execs in flight: never reaped
	ensuring chan struct{}
}

// New validates cfg and returns a provisioner on be.
func New(cfg Config, be backend.Backend) (*Provisioner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	layout := volume.Layout{Root: cfg.VolumeDir, Owner: cfg.SandboxOwner}
	return &Provisioner{cfg: cfg, be: be, files: &volume.Files{Layout: layout, MaxFile: cfg.MaxFileBytes},
		boxes: map[string]*box{}, calls: map[string]*call{}}, nil
}

// Config returns the validated configuration.
func (p *Provisioner) Config() Config { return p.cfg }

// Backend returns the backend's name.
func (p *Provisioner) Backend() string { return p.be.Name() }

// Recover destroys the sandboxes the backend lists but this process did
// not create (a previous process's): their specs died with it, and their
// files are on the volume, so the next call recreates them. Call once at
// start.
func (p *Provisioner) Recover(ctx context.Context) (int, error) {
	ids, err := p.be.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("list sandboxes: %w", err)
	}
	n := 0
	for _, id := range ids {
		p.mu.Lock()
		_, mine := p.boxes[id]
		p.mu.Unlock()
		if mine {
			continue
		}
		if err := p.be.Destroy(ctx, id); err != nil {
			return n, fmt.Errorf("destroy leftover sandbox %s: %w", id, err)
		}
		n++
	}
	if n > 0 {
		p.cfg.Logger.Info("sandbox provisioner: destroyed sandboxes left by a previous process", "count", n)
	}
	return n, nil
}

// Sandbox is what Ensure answers.
type Sandbox struct {
	ID      string `json:"sandbox_id"`
	Backend string `json:"backend"`
	Status  string `json:"status"`
}

// ErrBadEnv: a per-user env name that is not a shell variable name, or a
// value that would leak the provisioner token into the sandbox.
var ErrBadEnv = errors.New("bad sandbox env")

// Ensure creates or reuses the scope's sandbox with env (the user's agent
// env) merged over the global sandbox env.
func (p *Provisioner) Ensure(ctx context.Context, scope volume.Scope, env map[string]string) (Sandbox, error) {
	scope, err := scope.Normalize()
	if err != nil {
		return Sandbox{}, err
	}
	if scope.WorkspaceOnly() {
		return Sandbox{}, fmt.Errorf("%w: a sandbox needs a file thread", volume.ErrBadScope)
	}
	for k, v := range env {
		if !envName.MatchString(k) || len(v) > 32<<10 {
			return Sandbox{}, fmt.Errorf("%w: %q", ErrBadEnv, k)
		}
		if v == p.cfg.Token {
			return Sandbox{}, fmt.Errorf("%w: %s holds the provisioner token", ErrBadEnv, k)
		}
	}
	mounts, err := p.files.Layout.Prepare(scope)
	if err != nil {
		return Sandbox{}, fmt.Errorf("prepare volume: %w", err)
	}
	merged := maps.Clone(p.cfg.GlobalEnv)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, env)
	spec := backend.Spec{ID: scope.SandboxID(), UID: scope.UID, FileThread: scope.FileThread, SkillsThread: scope.SkillsThread,
		Env: merged, Mounts: mounts, Limits: p.cfg.Limits}
	if err := p.ensureSpec(ctx, spec, true); err != nil {
		return Sandbox{}, err
	}
	return Sandbox{ID: spec.ID, Backend: p.be.Name(), Status: "ready"}, nil
}

// ensureSpec makes the box live on the backend; concurrent callers of one
// id wait for a single Ensure. replace updates the recorded spec (new env).
func (p *Provisioner) ensureSpec(ctx context.Context, spec backend.Spec, replace bool) error {
	for {
		p.mu.Lock()
		b := p.boxes[spec.ID]
		if b == nil {
			b = &box{spec: spec}
			p.boxes[spec.ID] = b
		}
		if b.ensuring != nil {
			ch := b.ensuring
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		changed := replace && !maps.Equal(b.spec.Env, spec.Env)
		if replace {
			b.spec = spec
		}
		b.lastUsed = time.Now()
		if b.live && !changed {
			p.mu.Unlock()
			return nil
		}
		b.ensuring = make(chan struct{})
		s := b.spec
		p.mu.Unlock()
		err := p.be.Ensure(ctx, s)
		p.mu.Lock()
		close(b.ensuring)
		b.ensuring = nil
		b.live = err == nil
		b.lastUsed = time.Now()
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("ensure sandbox %s: %w", s.ID, err)
		}
		return nil
	}
}

// ErrUnknownSandbox: an id this process has no spec for (never created,
// deleted, or created by a previous process): the caller creates it again.
var ErrUnknownSandbox = errors.New("unknown sandbox")

// ExecRequest is the exec body.
type ExecRequest struct {
	Command        string            `json:"command"`
	Workdir        string            `json:"workdir,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	// IdempotencyKey (a tool call id): a repeated request with the same key
	// and sandbox gets the first one's result instead of running again (a
	// repeat while the first runs waits for it). Results are kept for an
	// hour, in memory: a command whose provisioner died with it ran to no
	// result and runs again.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ExecResult is the exec answer.
type ExecResult struct {
	Output    string `json:"output"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
}

// ErrBadRequest: an exec request the provisioner refuses.
var ErrBadRequest = errors.New("bad request")

// Exec runs a command in a sandbox, recreating it first if the reaper
// destroyed it. The timeout is capped by ExecTimeout. A request with an
// idempotency key runs at most once per key while its result is kept.
func (p *Provisioner) Exec(ctx context.Context, id string, r ExecRequest) (ExecResult, error) {
	if r.IdempotencyKey == "" {
		return p.execOnce(ctx, id, r)
	}
	key := id + "\x00" + r.IdempotencyKey
	p.mu.Lock()
	for k, c := range p.calls {
		if time.Since(c.at) > callTTL {
			delete(p.calls, k)
		}
	}
	c, seen := p.calls[key]
	if !seen {
		c = &call{done: make(chan struct{}), at: time.Now()}
		p.calls[key] = c
	}
	p.mu.Unlock()
	if seen {
		select {
		case <-c.done:
			return c.res, c.err
		case <-ctx.Done():
			return ExecResult{}, ctx.Err()
		}
	}
	c.res, c.err = p.execOnce(ctx, id, r)
	if c.err != nil {
		// Nothing ran to a result: a retry with the key may run it.
		p.mu.Lock()
		delete(p.calls, key)
		p.mu.Unlock()
	}
	close(c.done)
	return c.res, c.err
}

func (p *Provisioner) execOnce(ctx context.Context, id string, r ExecRequest) (ExecResult, error) {
	if r.Command == "" || len(r.Command) > 1<<20 {
		return ExecResult{}, fmt.Errorf("%w: command is empty or over 1 MiB", ErrBadRequest)
	}
	for k, v := range r.Env {
		if !envName.MatchString(k) || v == p.cfg.Token {
			return ExecResult{}, fmt.Errorf("%w: %q", ErrBadEnv, k)
		}
	}
	if r.Workdir != "" {
		wd, err := volume.Clean(r.Workdir)
		if err != nil {
			return ExecResult{}, err
		}
		r.Workdir = wd
	}
	timeout := p.cfg.ExecTimeout
	if r.TimeoutSeconds > 0 && time.Duration(r.TimeoutSeconds*float64(time.Second)) < timeout {
		timeout = time.Duration(r.TimeoutSeconds * float64(time.Second))
	}
	p.mu.Lock()
	b := p.boxes[id]
	if b == nil {
		p.mu.Unlock()
		return ExecResult{}, fmt.Errorf("%w: %s", ErrUnknownSandbox, id)
	}
	b.busy++
	spec := b.spec
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		b.busy--
		b.lastUsed = time.Now()
		p.mu.Unlock()
	}()
	req := backend.ExecRequest{Command: r.Command, Workdir: r.Workdir, Timeout: timeout, MaxOutput: p.cfg.MaxOutput, Env: r.Env}
	for attempt := 0; ; attempt++ {
		if err := p.ensureSpec(ctx, spec, false); err != nil {
			return ExecResult{}, err
		}
		res, err := p.be.Exec(ctx, id, req)
		if errors.Is(err, backend.ErrNotFound) && attempt == 0 {
			// The backend lost it (restart of a backend daemon, manual
			// cleanup): recreate once.
			p.mu.Lock()
			b.live = false
			p.mu.Unlock()
			continue
		}
		if err != nil {
			return ExecResult{}, fmt.Errorf("exec in %s: %w", id, err)
		}
		return ExecResult{Output: string(res.Output), ExitCode: res.ExitCode, Truncated: res.Truncated, TimedOut: res.TimedOut}, nil
	}
}

// Delete destroys a sandbox and forgets its spec (files stay).
func (p *Provisioner) Delete(ctx context.Context, id string) error {
	p.mu.Lock()
	delete(p.boxes, id)
	p.mu.Unlock()
	return p.be.Destroy(ctx, id)
}

// Info describes a known sandbox.
type Info struct {
	ID       string    `json:"sandbox_id"`
	UID      string    `json:"uid"`
	Live     bool      `json:"live"`
	LastUsed time.Time `json:"last_used"`
}

// List describes the known sandboxes.
func (p *Provisioner) List() []Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Info, 0, len(p.boxes))
	for id, b := range p.boxes {
		out = append(out, Info{ID: id, UID: b.spec.UID, Live: b.live, LastUsed: b.lastUsed.UTC()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reap destroys live sandboxes idle for IdleTimeout at now (never one
// with an exec in flight); their specs stay, so the next call recreates
// them with their files. It returns how many it destroyed.
func (p *Provisioner) Reap(ctx context.Context, now time.Time) int {
	p.mu.Lock()
	idle := map[string]*box{}
	for id, b := range p.boxes {
		if b.live && b.busy == 0 && b.ensuring == nil && now.Sub(b.lastUsed) >= p.cfg.IdleTimeout {
			// ensuring makes a concurrent Ensure wait until the destroy is done.
			b.live, b.ensuring = false, make(chan struct{})
			idle[id] = b
		}
	}
	p.mu.Unlock()
	for id, b := range idle {
		if err := p.be.Destroy(ctx, id); err != nil {
			p.cfg.Logger.Warn("sandbox reaper: destroy failed", "sandbox_id", id, "err", err)
		}
		p.mu.Lock()
		close(b.ensuring)
		b.ensuring = nil
		p.mu.Unlock()
	}
	return len(idle)
}

// RunReaper reaps every IdleCheck until ctx ends.
func (p *Provisioner) RunReaper(ctx context.Context) {
	t := time.NewTicker(p.cfg.IdleCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.Reap(ctx, now)
		}
	}
}

// Shutdown destroys every live sandbox (a clean stop leaves nothing behind).
func (p *Provisioner) Shutdown(ctx context.Context) {
	p.mu.Lock()
	var ids []string
	for id, b := range p.boxes {
		if b.live {
			ids = append(ids, id)
			b.live = false
		}
	}
	p.mu.Unlock()
	// Concurrently: a stop has a deadline, and a backend's Destroy waits for
	// the sandbox's processes to die.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = p.be.Destroy(ctx, id)
		}()
	}
	wg.Wait()
}

// Files returns the volume's file operations.
func (p *Provisioner) Files() *volume.Files { return p.files }
