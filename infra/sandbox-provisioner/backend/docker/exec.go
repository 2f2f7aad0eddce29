package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Exec runs r.Command with /bin/sh -c in the sandbox as the sandbox user.
// Output is stdout and stderr interleaved, capped at r.MaxOutput bytes
// (Truncated set; the command keeps running to its end). When r.Timeout
// passes, every process of the sandbox user is killed (the sandbox is one
// conversation's; a timed-out command's background children go too) and
// TimedOut is set. A sandbox whose limits leave no room even for the kill
// (a fork bomb at its pids limit) is restarted; its volume files stay. A
// command the runtime cannot start at all (the pids limit already reached
// by earlier background processes) clears the sandbox the same way and is
// tried once more.
func (b *Backend) Exec(ctx context.Context, id string, r backend.ExecRequest) (backend.ExecResult, error) {
	res, err := b.exec(ctx, id, r)
	if err == nil && res.ExitCode == 126 && bytes.HasPrefix(res.Output, []byte("OCI runtime exec failed")) {
		// The runtime could not even start the command: the sandbox is
		// full (its pids limit reached). Clear it and try once more.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		b.killAll(kctx, b.ContainerName(id))
		kcancel()
		res, err = b.exec(ctx, id, r)
	}
	return res, err
}

func (b *Backend) exec(ctx context.Context, id string, r backend.ExecRequest) (backend.ExecResult, error) {
	name := b.ContainerName(id)
	maxOut := r.MaxOutput
	if maxOut <= 0 {
		maxOut = backend.DefaultOutput
	}
	wd := r.Workdir
	if wd == "" {
		wd = backend.WorkspaceDir
	}
	env := make([]string, 0, len(r.Env))
	for k, v := range r.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	var created struct {
		ID string `json:"Id"`
	}
	err := b.c.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/exec", nil, map[string]any{
		"AttachStdout": true,
		"AttachStderr": true,
		// One pipe for both streams, as in a terminal: stderr lines keep their place.
		"Cmd":        []string{"/bin/sh", "-c", `exec /bin/sh -c "$1" 2>&1`, "sh", r.Command},
		"Env":        env,
		"WorkingDir": wd,
		"User":       strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID),
		"Privileged": false,
	}, &created)
	if errors.Is(err, ErrNotFound) || errors.Is(err, errConflict) {
		// No such container, or it is stopped (reaped, or its engine
		// restarted): the caller Ensures and retries.
		return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w: %w", id, backend.ErrNotFound, err)
	}
	if err != nil {
		return backend.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = b.cfg.ExecTimeout
	}
	{
		t := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
		defer t.Stop()
	}
	res := backend.ExecResult{ExitCode: -1}
	out := &capped{max: maxOut}
	resp, err := b.c.request(runCtx, http.MethodPost, "/exec/"+created.ID+"/start", nil,
		jsonBody(map[string]any{"Detach": false, "Tty": false}), "application/json")
	if err == nil {
		err = demux(bufio.NewReaderSize(resp.Body, 32<<10), out)
		resp.Body.Close()
	}
	res.Output, res.Truncated = out.buf, out.truncated
	if runCtx.Err() != nil {
		// Timed out, or the caller gave up: the command must not outlive the call.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer kcancel()
		b.killAll(kctx, name)
		if !timedOut.Load() {
			return res, ctx.Err()
		}
		res.TimedOut = true
		if code, ok := b.exitCode(kctx, created.ID); ok {
			res.ExitCode = code
		}
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("exec in sandbox %s: %w", id, err)
	}
	code, ok := b.exitCode(ctx, created.ID)
	if !ok {
		return res, fmt.Errorf("exec in sandbox %s: no exit code", id)
	}
	res.ExitCode = code
	return res, nil
}

// exitCode waits for the exec to be reported finished (the stream can end
// a moment before the engine records the exit) and returns its code.
func (b *Backend) exitCode(ctx context.Context, execID string) (int, bool) {
	delay := time.Millisecond
	for i := 0; i < 200; i++ {
		var st struct {
			Running  bool `json:"Running"`
			ExitCode int  `json:"ExitCode"`
		}
		if err := b.c.do(ctx, http.MethodGet, "/exec/"+execID+"/json", nil, nil, &st); err != nil {
			return 0, false
		}
		if !st.Running {
			return st.ExitCode, true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
	return 0, false
}

// killAll kills every process of the sandbox user except the container's
// PID 1. When even that exec cannot start, the container is restarted.
func (b *Backend) killAll(ctx context.Context, name string) {
	var created struct {
		ID string `json:"Id"`
	}
	err := b.c.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/exec", nil, map[string]any{
		"AttachStdout": true, "AttachStderr": true,
		"Cmd":  []string{"/bin/sh", "-c", "kill -KILL -1 2>/dev/null; exit 0"},
		"User": strconv.Itoa(b.cfg.UID) + ":" + strconv.Itoa(b.cfg.GID),
	}, &created)
	if err == nil {
		resp, err := b.c.request(ctx, http.MethodPost, "/exec/"+created.ID+"/start", nil,
			jsonBody(map[string]any{"Detach": false, "Tty": false}), "application/json")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if code, ok := b.exitCode(ctx, created.ID); ok && code == 0 {
				return
			}
		}
	}
	_ = b.c.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(name)+"/restart", url.Values{"t": {"0"}}, nil, nil)
}

// capped collects up to max bytes and notes whether more arrived.
type capped struct {
	buf       []byte
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	if len(p) > room {
		c.truncated = true
		c.buf = append(c.buf, p[:max(room, 0)]...)
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// demux copies the payloads of the engine's multiplexed stream (8-byte
// frame headers: stream, 3 zero bytes, big-endian length) into w in order.
func demux(r io.Reader, w io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if hdr[0] == 0 { // stdin: not attached, skip
			if _, err := io.CopyN(io.Discard, r, n); err != nil {
				return err
			}
			continue
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return err
		}
	}
}
