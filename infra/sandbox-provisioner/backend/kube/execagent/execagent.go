// Package execagent is the small HTTP server that runs inside a
// Kubernetes sandbox pod and executes commands for the provisioner: the
// kube backend calls it over the pod's Service instead of the pods/exec
// subresource (a SPDY/WebSocket stream that needs the API server in the
// data path and the provisioner holding exec rights on every pod). Only
// the provisioner's pods may reach it (the sandbox's NetworkPolicy); it
// runs as the sandbox's non-root user, so it can do nothing the command
// could not do itself.
//
// One call: POST /exec with Request, answered with Response. The command
// runs with /bin/sh -c in its own process group, stdout and stderr on one
// pipe, output capped (Truncated), CPU-time and file-size rlimits applied
// through the shell's ulimit, and on timeout the whole group is killed.
//
// Imported by: infra/sandbox-provisioner/backend/kube (the wire types),
// infra/sandbox-provisioner/cmd/sandbox-exec-agent. May import: the
// standard library.
package execagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Request is one command. TimeoutMS 0 means the agent's default.
type Request struct {
	Command   string            `json:"command"`
	Workdir   string            `json:"workdir,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	MaxOutput int               `json:"max_output,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// Response is the command's outcome. ExitCode is -1 when it was killed by
// its timeout.
type Response struct {
	Output    []byte `json:"output"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
}

// Config is the agent's fixed setup (from its pod's environment).
type Config struct {
	Shell         string        // default /bin/sh
	Workdir       string        // default /home/gem/user-data/workspace
	Timeout       time.Duration // default 180 s
	MaxOutput     int           // default 262144
	CPUSeconds    int64         // ulimit -t per command; 0 = none
	FileSizeBytes int64         // ulimit -f per command; 0 = none
}

// Handler serves POST /exec and GET /healthz.
type Handler struct{ cfg Config }

// New returns the agent's handler.
func New(cfg Config) *Handler {
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/home/gem/user-data/workspace"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 180 * time.Second
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 262144
	}
	return &Handler{cfg: cfg}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/exec" && r.Method == http.MethodPost:
		var req Request
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Command == "" {
			http.Error(w, `{"error":{"code":"bad_request","message":"want a JSON body with a command"}}`, http.StatusBadRequest)
			return
		}
		res, err := h.Run(r.Context(), req)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "exec_failed", "message": err.Error()}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	default:
		http.NotFound(w, r)
	}
}

// Run runs one command. The context's end (the caller hung up) kills it
// like a timeout.
func (h *Handler) Run(ctx context.Context, req Request) (Response, error) {
	timeout := h.cfg.Timeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = h.cfg.MaxOutput
	}
	wd := req.Workdir
	if wd == "" {
		wd = h.cfg.Workdir
	}
	script := ""
	if h.cfg.CPUSeconds > 0 {
		script += "ulimit -t " + strconv.FormatInt(h.cfg.CPUSeconds, 10) + " || exit 125; "
	}
	if h.cfg.FileSizeBytes > 0 { // POSIX ulimit -f counts 512-byte blocks
		script += "ulimit -f " + strconv.FormatInt((h.cfg.FileSizeBytes+511)/512, 10) + " || exit 125; "
	}
	script += `exec ` + h.cfg.Shell + ` -c "$1"`
	cmd := exec.Command(h.cfg.Shell, "-c", script, "sh", req.Command)
	cmd.Dir = wd
	cmd.Env = os.Environ()
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+req.Env[k])
	}
	out := &capped{max: maxOut}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A background child still holding the pipe does not hold the answer
	// once the command itself has exited.
	cmd.WaitDelay = 500 * time.Millisecond
	if err := cmd.Start(); err != nil {
		if !errors.Is(err, syscall.EAGAIN) {
			return Response{}, fmt.Errorf("start: %w", err)
		}
		// The sandbox is full (a fork bomb that escaped its process group):
		// clear every process this agent may signal but itself, then try once more.
		_ = syscall.Kill(-1, syscall.SIGKILL)
		time.Sleep(100 * time.Millisecond)
		retry := exec.Command(cmd.Path, cmd.Args[1:]...)
		retry.Dir, retry.Env, retry.Stdout, retry.Stderr = cmd.Dir, cmd.Env, out, out
		retry.SysProcAttr, retry.WaitDelay = cmd.SysProcAttr, cmd.WaitDelay
		if err := retry.Start(); err != nil {
			return Response{}, fmt.Errorf("start: %w", err)
		}
		cmd = retry
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	if timedOut || ctx.Err() != nil && err == nil {
		// The whole group: background children the command started go too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	} else {
		// A command's background children end with it, as in the bwrap
		// backend (--die-with-parent): a fork bomb that returned at once
		// must not keep the sandbox full for the next command.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res := Response{ExitCode: 0, TimedOut: timedOut}
	res.Output, res.Truncated = out.bytes()
	var ee *exec.ExitError
	switch {
	case timedOut:
		res.ExitCode = -1
	case err == nil, errors.Is(err, exec.ErrWaitDelay): // exited 0; a child kept the pipe
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return res, err
	}
	if ctx.Err() != nil && !timedOut {
		return res, ctx.Err()
	}
	return res, nil
}

// capped collects up to max bytes from concurrent writers.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if len(p) > room {
		c.truncated = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *capped) bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.truncated
}
