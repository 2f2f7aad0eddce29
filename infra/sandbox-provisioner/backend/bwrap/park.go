package bwrap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Each exec runs in a fresh bwrap tree, but the tree is set up before the
// request comes: bwrap builds the namespaces, mounts and seccomp filter,
// reports its sandbox process on the info fd and waits on its block fd;
// that process is moved into the exec's own cgroup (a cgroup v1 migration
// costs ~10 ms on hosts like this one: it waits for an RCU grace period)
// and the tree stays parked. An exec takes the sandbox's parked tree,
// writes the request (workdir, env, command) as a small shell script to the
// tree's fd 6 (its one shell sources it and evaluates the command),
// releases the block fd and waits; then the next tree is
// parked in the background. So a command still starts in new namespaces
// with a fresh /home/gem and /tmp, in its own group (a timeout kills exactly
// its processes), and the tree dies with it — only the set-up moved out of
// the request's path. An exec that finds no parked tree (concurrent execs,
// a park that failed) waits for the park under way or sets one up itself.

// proc is one parked bwrap tree.
type proc struct {
	cmd     *exec.Cmd
	group   string // <sandbox id>/x<n>
	out     *capped
	blockW  *os.File      // a byte releases the tree
	scriptW *os.File      // the request, read by the tree's /bin/sh from fd 6
	sources []os.FileInfo // the mount sources as bound (a replaced directory means a stale tree)
	limits  backend.Limits
	exited  chan struct{} // closed once cmd.Wait returned waitErr
	waitErr error
}

// start sets up and parks a tree for spec in a new exec group of id.
func (b *Backend) start(id string, spec backend.Spec) (*proc, error) {
	group := filepath.Join(id, "x"+strconv.FormatInt(b.execSeq.Add(1), 10))
	// The exec group is made while bwrap sets up: it is needed only for
	// the move.
	made := make(chan error, 1)
	go func() { made <- b.cg.execGroup(id, filepath.Base(group)) }()
	groupMade := sync.OnceValue(func() error {
		if err := <-made; err != nil {
			return fmt.Errorf("exec group: %w", err)
		}
		return nil
	})
	p := &proc{group: group, out: &capped{max: backend.DefaultOutput}, limits: spec.Limits, exited: make(chan struct{})}
	var closeAfter []*os.File
	fail := func(err error) (*proc, error) {
		for _, f := range closeAfter {
			f.Close()
		}
		if p.blockW != nil {
			p.blockW.Close()
			p.scriptW.Close()
		}
		_ = groupMade()
		go b.cg.remove(group)
		return nil, err
	}
	for _, m := range spec.Mounts {
		fi, err := os.Stat(m.HostPath)
		if err != nil {
			return fail(fmt.Errorf("bwrap %s: mount source: %w", id, err))
		}
		p.sources = append(p.sources, fi)
	}
	// fds: 3 seccomp program, 4 info (bwrap writes), 5 block (bwrap
	// reads), 6 the request script (the tree's shell reads).
	filterR, err := pipeWith(b.filter)
	if err != nil {
		return fail(err)
	}
	closeAfter = append(closeAfter, filterR)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer infoR.Close()
	closeAfter = append(closeAfter, infoW)
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closeAfter = append(closeAfter, blockR)
	scriptR, scriptW, err := os.Pipe()
	if err != nil {
		blockW.Close()
		return fail(err)
	}
	closeAfter = append(closeAfter, scriptR)
	p.blockW, p.scriptW = blockW, scriptW
	if b.asUser {
		// The tree's shell opens the pipe by /proc/self/fd/6, which checks
		// the pipe's owner: the sandbox uid, not the provisioner's root.
		if err := scriptR.Chown(b.cfg.HostUID, b.cfg.HostGID); err != nil {
			return fail(fmt.Errorf("bwrap %s: request pipe: %w", id, err))
		}
	}

	cmd := exec.Command(b.cfg.Bwrap, b.args(spec)...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.ExtraFiles = []*os.File{filterR, infoW, blockR, scriptR}
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if b.asUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(b.cfg.HostUID), Gid: uint32(b.cfg.HostGID), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("bwrap %s: start: %w", id, err))
	}
	for _, f := range closeAfter {
		f.Close()
	}
	closeAfter = nil
	p.cmd = cmd
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	// The outer bwrap joins the exec's group at once, in the background: a
	// cgroup v1 move waits for an RCU grace period (≈10 ms here), which
	// then overlaps bwrap's set-up instead of following it, and the
	// sandbox process bwrap clones is usually born in the group. (The outer
	// bwrap only waits for its child; in the group it counts against the
	// limits too and dies with a timeout's sweep.)
	outerMoved := make(chan error, 1)
	go func() {
		err := groupMade()
		if err == nil {
			err = b.cg.join(group, cmd.Process.Pid)
		}
		outerMoved <- err
	}()
	// bwrap reports the sandbox's pid once its namespaces exist and then
	// waits on the block fd: that process (every process of the sandbox
	// descends from it) must be in the group before a line of the command
	// runs; moving it again is quick right after the first move.
	child, err := readChildPid(infoR)
	if merr := <-outerMoved; err == nil {
		err = merr
	}
	if gerr := groupMade(); err == nil {
		err = gerr
	}
	if err == nil {
		err = b.cg.join(group, child)
	}
	if err != nil {
		p.kill(b)
		return nil, fmt.Errorf("bwrap %s: setup: %w (output %q)", id, err, p.out.buf)
	}
	return p, nil
}

// kill ends a tree (parked or running) and removes its group.
func (p *proc) kill(b *Backend) {
	p.blockW.Close()
	p.scriptW.Close()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	// A parked tree is one process group: once bwrap is reaped the group
	// sweep usually finds nothing left (no sweep-and-wait round).
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	b.cg.kill(p.group)
	<-p.exited
	go b.cg.remove(p.group)
}

// errStale: a parked tree that cannot be released (it died while parked).
var errStale = errors.New("parked tree is gone")

// run releases a parked tree with r and waits for the command.
func (b *Backend) run(ctx context.Context, p *proc, r backend.ExecRequest) (backend.ExecResult, error) {
	script, err := requestScript(r, p.limits)
	if err != nil {
		p.kill(b)
		return backend.ExecResult{}, err
	}
	p.out.reset(r.MaxOutput)
	if _, err := p.blockW.Write([]byte{1}); err != nil {
		p.kill(b)
		return backend.ExecResult{}, fmt.Errorf("%w: %v", errStale, err)
	}
	p.blockW.Close()
	go func() {
		// A command that exits without reading it all closes the pipe.
		_, _ = p.scriptW.WriteString(script)
		p.scriptW.Close()
	}()
	defer func() { go b.cg.remove(p.group) }()
	killTree := func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		b.cg.kill(p.group)
	}
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	var res backend.ExecResult
	select {
	case <-p.exited:
	case <-timer.C:
		res.TimedOut = true
		killTree()
		<-p.exited
	case <-ctx.Done():
		killTree()
		<-p.exited
		return backend.ExecResult{}, ctx.Err()
	}
	err = p.waitErr
	res.Output, res.Truncated = p.out.result()
	res.ExitCode = p.cmd.ProcessState.ExitCode()
	if res.TimedOut {
		res.ExitCode = -1
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !res.TimedOut {
		return res, fmt.Errorf("bwrap: wait: %w", err)
	}
	return res, nil
}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// The released tree runs one shell, `/bin/sh -c treeShell /bin/sh`: it
// sources the request script from fd 6 (the sourced file's descriptor is
// closed when it ends) and evaluates the command in itself — no second
// shell start, which was a third of a cold exec's run. The variable is
// unset before the command runs, so the command sees only its env.
const (
	commandVar = "__yuxi_command"
	treeShell  = ". /proc/self/fd/6 && eval \"unset " + commandVar + "; $" + commandVar + "\""
)

// requestScript is the request as the tree's shell sources it: close the
// request fd, lower the limits (ulimits), enter the workdir, export the
// request's env and set the command (run by treeShell with eval, as
// /bin/sh -c would: $0 is /bin/sh). Every value is single-quoted; env
// names that are not shell names are refused (the provisioner accepts
// only shell names).
func requestScript(r backend.ExecRequest, l backend.Limits) (string, error) {
	if strings.ContainsRune(r.Command, 0) || strings.ContainsRune(r.Workdir, 0) {
		return "", errors.New("bwrap: NUL byte in the command or workdir")
	}
	var b strings.Builder
	b.WriteString("exec 6<&-\n" + ulimits(l) + "cd -- " + quote(r.Workdir) + " || exit 1\n")
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		if !shellName.MatchString(k) || k == commandVar || strings.ContainsRune(r.Env[k], 0) {
			return "", fmt.Errorf("bwrap: bad env %q", k)
		}
		b.WriteString("export " + k + "=" + quote(r.Env[k]) + "\n")
	}
	b.WriteString(commandVar + "=" + quote(r.Command) + "\n")
	return b.String(), nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// sameSpec: a recorded spec Ensure need not replace.
func sameSpec(a, b backend.Spec) bool {
	return a.ID == b.ID && a.UID == b.UID && a.FileThread == b.FileThread && a.SkillsThread == b.SkillsThread &&
		maps.Equal(a.Env, b.Env) && slices.Equal(a.Mounts, b.Mounts) && a.Limits == b.Limits
}

// fresh: the tree's binds still show the mount sources (a directory
// removed and made again since would be invisible to it).
func (p *proc) fresh(spec backend.Spec) bool {
	if len(p.sources) != len(spec.Mounts) {
		return false
	}
	for i, m := range spec.Mounts {
		fi, err := os.Stat(m.HostPath)
		if err != nil || !os.SameFile(fi, p.sources[i]) {
			return false
		}
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// park sets up the next tree of sandbox id unless one is parked or being
// set up; it runs in the background after Ensure and after each exec.
func (b *Backend) park(id string) {
	b.mu.Lock()
	sb := b.sandboxes[id]
	if sb == nil || sb.gone || sb.parked != nil || sb.parking != nil {
		b.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	sb.parking = ch
	spec := sb.spec
	b.mu.Unlock()
	p, err := b.start(id, spec)
	b.mu.Lock()
	sb.parking = nil
	if err == nil && !sb.gone {
		sb.parked, p = p, nil
	}
	b.mu.Unlock()
	if p != nil {
		p.kill(b) // destroyed meanwhile: gone before Destroy returns (it waits on ch)
	}
	close(ch)
}

// take returns sandbox id's parked tree (waiting for one being set up), or
// nil when there is none to take.
func (b *Backend) take(ctx context.Context, id string) (*proc, backend.Spec, error) {
	for {
		b.mu.Lock()
		sb := b.sandboxes[id]
		if sb == nil {
			b.mu.Unlock()
			return nil, backend.Spec{}, fmt.Errorf("bwrap %s: %w", id, backend.ErrNotFound)
		}
		spec := sb.spec
		if p := sb.parked; p != nil {
			sb.parked = nil
			b.mu.Unlock()
			if !p.fresh(spec) {
				p.kill(b)
				return nil, spec, nil
			}
			return p, spec, nil
		}
		ch := sb.parking
		b.mu.Unlock()
		if ch == nil {
			return nil, spec, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, spec, ctx.Err()
		}
	}
}

// Exec runs one command in a fresh bwrap tree inside the sandbox's limits:
// the parked one, or one set up now.
func (b *Backend) Exec(ctx context.Context, id string, r backend.ExecRequest) (backend.ExecResult, error) {
	p, spec, err := b.take(ctx, id)
	if err != nil {
		return backend.ExecResult{}, err
	}
	if r.Timeout <= 0 {
		r.Timeout = b.cfg.ExecTimeout
	}
	if r.MaxOutput <= 0 {
		r.MaxOutput = backend.DefaultOutput
	}
	if r.Workdir == "" {
		r.Workdir = backend.WorkspaceDir
	}
	defer func() { go b.park(id) }()
	for attempt := 0; ; attempt++ {
		if p == nil {
			if p, err = b.start(id, spec); err != nil {
				return backend.ExecResult{}, err
			}
		}
		res, err := b.run(ctx, p, r)
		if errors.Is(err, errStale) && attempt == 0 {
			p = nil
			continue
		}
		if err != nil {
			return res, fmt.Errorf("bwrap %s: %w", id, err)
		}
		return res, nil
	}
}
