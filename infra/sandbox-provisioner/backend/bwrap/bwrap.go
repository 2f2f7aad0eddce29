// Package bwrap is the provisioner's embedded sandbox backend on Linux:
// every command runs under bubblewrap with all namespaces unshared (no
// network at all: only a loopback interface), read-only system binds, the
// scope's read-write user-data binds and read-only skills, a tmpfs home
// and /tmp, a seccomp filter, a non-root uid inside and outside (bwrap is
// started as the sandbox host uid, so nothing runs as uid 0), and limits:
// memory and process count by cgroups (v1 memory and pids controllers
// below the provisioner's own group; rlimits only where none are
// writable), CPU time and file size by rlimits.
//
// A sandbox here is its spec and its cgroup: each Exec runs in a fresh
// bwrap process tree in it (so /home/gem and /tmp are empty at each
// command; files persist only in the user-data binds, as in the
// original's reclaimable sandboxes), and the tree dies with its command.
// The tree is set up and placed in its cgroup before the request comes
// (park.go), so an exec pays neither bwrap's set-up nor a cgroup move.
// List reads the cgroup directories, so a restarted provisioner finds the
// sandboxes its predecessor created and can destroy them.
//
// Imported by: the provisioner (infra/sandbox-provisioner), its tests and
// the local runner. May import: infra/sandbox-provisioner/backend,
// golang.org/x/net/bpf, golang.org/x/sys/unix and the standard library.
package bwrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// Config of the backend; zero values take the defaults.
type Config struct {
	Bwrap        string         // bubblewrap binary (default: bwrap on PATH)
	RuntimeDir   string         // where the sandbox's /etc/passwd and friends are written (default: a temp dir)
	CgroupMount  string         // default /sys/fs/cgroup
	CgroupParent string         // group below the provisioner's own (default yuxi-sandboxes)
	ExecTimeout  time.Duration  // default for ExecRequest.Timeout (default 180s)
	Limits       backend.Limits // defaults for Spec.Limits' zero fields
	HostUID      int            // uid bwrap runs as when the provisioner is root (default backend.SandboxUID)
	HostGID      int
}

// Backend runs sandboxes with bubblewrap.
type Backend struct {
	cfg        Config
	cg         *cgroups
	filter     []byte
	etc        []string // --ro-bind pairs for the sandbox's /etc
	sys        []string // system binds
	asUser     bool     // provisioner is root: start bwrap as HostUID
	ownRuntime bool
	execSeq    atomic.Int64

	mu        sync.Mutex
	sandboxes map[string]*sandbox
}

type sandbox struct {
	spec    backend.Spec
	parked  *proc         // a tree set up for the next exec (park.go)
	parking chan struct{} // closed when the park under way ends
	gone    bool          // destroyed or replaced: a park under way is discarded
}

// DefaultLimits apply to fields a Spec leaves zero.
var DefaultLimits = backend.Limits{MemoryBytes: 1 << 30, Pids: 256, CPUSeconds: 600, FileSizeBytes: 1 << 30}

// New checks bubblewrap and the host and prepares the shared pieces.
func New(cfg Config) (*Backend, error) {
	if cfg.Bwrap == "" {
		cfg.Bwrap = "bwrap"
	}
	path, err := exec.LookPath(cfg.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("bwrap backend: bubblewrap not found (apt-get install bubblewrap): %w", err)
	}
	cfg.Bwrap = path
	if cfg.CgroupMount == "" {
		cfg.CgroupMount = "/sys/fs/cgroup"
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "yuxi-sandboxes"
	}
	if cfg.ExecTimeout <= 0 {
		cfg.ExecTimeout = 180 * time.Second
	}
	if cfg.HostUID == 0 {
		cfg.HostUID, cfg.HostGID = backend.SandboxUID, backend.SandboxGID
	}
	cfg.Limits = cfg.Limits.Or(DefaultLimits)
	b := &Backend{cfg: cfg, sandboxes: map[string]*sandbox{}, asUser: os.Geteuid() == 0}
	if b.filter, err = seccompProgram(); err != nil {
		return nil, err
	}
	if b.cg, err = newCgroups(cfg.CgroupMount, cfg.CgroupParent); err != nil {
		return nil, err
	}
	if cfg.RuntimeDir == "" {
		if cfg.RuntimeDir, err = os.MkdirTemp("", "yuxi-bwrap-"); err != nil {
			return nil, err
		}
		b.ownRuntime = true
		b.cfg.RuntimeDir = cfg.RuntimeDir
		if err := os.Chmod(cfg.RuntimeDir, 0o711); err != nil {
			return nil, err
		}
	}
	if err := b.reachable(cfg.RuntimeDir); err != nil {
		return nil, err
	}
	if err := b.writeEtc(); err != nil {
		return nil, err
	}
	b.sys = systemBinds()
	return b, nil
}

// CgroupsAvailable reports whether memory and pids limits are enforced by
// cgroups (otherwise only rlimits apply).
func (b *Backend) CgroupsAvailable() bool { return b.cg.available() }

// systemBinds: /usr read-only, and /bin, /lib… as on the host (symlinks
// into /usr on merged-/usr systems, read-only binds otherwise).
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return args
}

// writeEtc builds the sandbox's /etc once, in the runtime dir: its own
// passwd/group/hosts, copies of the small host files programs need
// (dynamic linker cache, timezone, mime types…) and mount points for the
// host directories bound read-only over them (certificates, alternatives,
// fonts, python3). Nothing else of the host's /etc is visible.
func (b *Backend) writeEtc() error {
	dir := filepath.Join(b.cfg.RuntimeDir, "etc")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	names := []string{"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
		"ca-certificates.conf", "localtime", "timezone", "mime.types", "fonts", "magic", "magic.mime", "protocols", "services",
		"python3", "gitconfig", "inputrc", "bash.bashrc", "profile", "environment", "papersize", "ImageMagick-6", "perl"}
	if matches, _ := filepath.Glob("/etc/python3.*"); len(matches) > 0 {
		for _, p := range matches {
			names = append(names, filepath.Base(p))
		}
	}
	var dirs []string
	for _, name := range names {
		src := filepath.Join("/etc", name)
		fi, err := os.Stat(src)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			// Directories are bound over an empty mount point: copying
			// certificate stores and alternatives is slow.
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				return err
			}
			dirs = append(dirs, "--ro-bind", src, src)
		default:
			if err := copyFile(src, filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("sandbox /etc: %w", err)
			}
		}
	}
	files := map[string]string{
		"passwd":        fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\ngem:x:%d:%d:gem:%s:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", backend.SandboxUID, backend.SandboxGID, backend.Home),
		"group":         fmt.Sprintf("root:x:0:\ngem:x:%d:\nnogroup:x:65534:\n", backend.SandboxGID),
		"hosts":         "127.0.0.1 localhost sandbox\n::1 localhost\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
		"hostname":      "sandbox\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	b.etc = append([]string{"--ro-bind", dir, "/etc"}, dirs...)
	return nil
}

// copyFile copies a world-readable regular file (a symlink is followed:
// /etc/localtime points into /usr/share/zoneinfo).
func copyFile(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o004 == 0 || fi.Size() > 16<<20 {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// Close removes the backend's parent cgroups when no sandbox is left in
// them (sandboxes are left running for a successor process otherwise).
func (b *Backend) Close() {
	b.mu.Lock()
	var parked []*proc
	var parking []chan struct{}
	for _, sb := range b.sandboxes {
		if sb.parked != nil {
			parked = append(parked, sb.parked)
			sb.parked = nil
		}
		if sb.parking != nil {
			parking = append(parking, sb.parking)
		}
		sb.gone = true
	}
	b.mu.Unlock()
	for _, p := range parked {
		p.kill(b)
	}
	for _, ch := range parking {
		<-ch
	}
	b.cg.close()
	if b.ownRuntime {
		_ = os.RemoveAll(b.cfg.RuntimeDir)
	}
}

// reachable: bwrap runs as the sandbox host uid and resolves its bind
// sources with that uid's permissions, so every directory above a source
// must be searchable by others (the volume's own directories are 0711).
func (b *Backend) reachable(path string) error {
	if !b.asUser {
		return nil
	}
	for d := filepath.Dir(filepath.Clean(path)); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("bwrap: %s is not searchable by the sandbox uid (chmod o+x %s)", d, d)
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "bwrap" }

// Ensure records the spec and creates the sandbox's cgroups; it is
// idempotent (a second call with the same ID replaces the spec, e.g. new
// env, and keeps the groups).
func (b *Backend) Ensure(ctx context.Context, s backend.Spec) error {
	if s.ID == "" || strings.ContainsAny(s.ID, "/\x00") || s.ID == "." || s.ID == ".." {
		return fmt.Errorf("bwrap: bad sandbox id %q", s.ID)
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.HostPath) || !strings.HasPrefix(m.SandboxPath, backend.Home+"/") {
			return fmt.Errorf("bwrap: bad mount %+v", m)
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			return fmt.Errorf("bwrap: mount source: %w", err)
		}
		if err := b.reachable(m.HostPath); err != nil {
			return err
		}
	}
	s.Limits = s.Limits.Or(b.cfg.Limits)
	b.mu.Lock()
	old := b.sandboxes[s.ID]
	same := old != nil && sameSpec(old.spec, s)
	b.mu.Unlock()
	if same {
		return nil
	}
	if err := b.cg.create(s.ID, s.Limits.MemoryBytes, s.Limits.Pids); err != nil {
		return err
	}
	b.mu.Lock()
	var stale *proc
	if old = b.sandboxes[s.ID]; old != nil {
		old.gone, stale, old.parked = true, old.parked, nil
	}
	b.sandboxes[s.ID] = &sandbox{spec: s}
	b.mu.Unlock()
	if stale != nil {
		go stale.kill(b)
	}
	// The first exec's tree is set up while the caller's answer travels.
	go b.park(s.ID)
	return nil
}

// List implements backend.Backend: the sandboxes with a cgroup (including
// ones a previous process created) and the ones this process ensured.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	ids := b.cg.list()
	b.mu.Lock()
	for id := range b.sandboxes {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	sort.Strings(ids)
	return ids, nil
}

// Destroy kills whatever still runs in the sandbox and removes its groups.
// Files on the volume are untouched. Unknown ids are not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return nil
	}
	b.mu.Lock()
	var stale *proc
	var parking chan struct{}
	if sb := b.sandboxes[id]; sb != nil {
		sb.gone, stale, sb.parked, parking = true, sb.parked, nil, sb.parking
	}
	delete(b.sandboxes, id)
	b.mu.Unlock()
	if stale != nil {
		stale.kill(b)
	}
	if parking != nil {
		<-parking // the park under way sees gone and ends its tree
	}
	b.cg.kill(id)
	b.cg.remove(id)
	return nil
}

// args is the bwrap command line of a tree for spec: everything but the
// request, which the parked tree reads from fd 6 once released (park.go).
func (b *Backend) args(spec backend.Spec) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
		"--hostname", "sandbox", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(backend.SandboxUID), "--gid", strconv.Itoa(backend.SandboxGID),
	}
	a = append(a, b.sys...)
	a = append(a, b.etc...)
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(spec.Limits.FileSizeBytes, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(spec.Limits.FileSizeBytes, 10), "--tmpfs", backend.Home,
		"--dir", backend.UserDataDir)
	mounts := slices.Clone(spec.Mounts)
	sort.Slice(mounts, func(i, j int) bool { return mounts[i].SandboxPath < mounts[j].SandboxPath })
	for _, m := range mounts {
		if m.ReadOnly {
			a = append(a, "--ro-bind", m.HostPath, m.SandboxPath)
		} else {
			a = append(a, "--bind", m.HostPath, m.SandboxPath)
		}
	}
	env := map[string]string{
		"HOME": backend.Home, "USER": "gem", "LOGNAME": "gem", "SHELL": "/bin/sh", "LANG": "C.UTF-8",
		"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", "TMPDIR": "/tmp",
	}
	maps.Copy(env, spec.Env)
	a = append(a, "--clearenv")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			continue
		}
		a = append(a, "--setenv", k, env[k])
	}
	a = append(a, "--chdir", "/",
		"--seccomp", "3", "--info-fd", "4", "--block-fd", "5",
		"--")
	return append(a, "/bin/sh", "-c", treeShell, "/bin/sh")
}

// pipeWith returns the read end of a pipe holding data (the filter is a
// few hundred bytes, far below a pipe's buffer).
func pipeWith(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	w.Close()
	return r, nil
}

func readChildPid(r io.Reader) (int, error) {
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil {
		return 0, fmt.Errorf("read bwrap info: %w", err)
	}
	if info.ChildPid <= 0 {
		return 0, errors.New("bwrap info has no child-pid")
	}
	return info.ChildPid, nil
}

// ulimits is the start of a tree's request script: the shell lowers its
// own limits before it runs anything of the request (the ulimit builtin,
// as prlimit(1) did, without another exec): CPU time (soft: SIGXCPU, hard
// a second later: SIGKILL), file size (512-byte blocks), core dumps and
// open files (best effort: a host whose hard limit is lower keeps it).
// Descendants inherit them and, without CAP_SYS_RESOURCE, cannot raise
// them; a limit that cannot be set ends the command before it runs. (The
// provisioner cannot set them on the sandbox from outside: that needs
// CAP_SYS_RESOURCE, which container hosts often drop even for root.)
func ulimits(l backend.Limits) string {
	return fmt.Sprintf("ulimit -S -t %d && ulimit -H -t %d && ulimit -f %d && ulimit -c 0 || exit 126\n"+
		"ulimit -S -n 1024 2>/dev/null; ulimit -H -n 4096 2>/dev/null\n",
		l.CPUSeconds, l.CPUSeconds+1, max(l.FileSizeBytes/512, 1))
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - len(c.buf)
	if len(p) > room {
		c.truncated = true
		c.buf = append(c.buf, p[:max(room, 0)]...)
	} else {
		c.buf = append(c.buf, p...)
	}
	return len(p), nil
}

// reset empties the buffer and sets the cap (a parked tree learns its
// request's cap when released).
func (c *capped) reset(max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max, c.buf, c.truncated = max, nil, false
}

func (c *capped) result() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf, c.truncated
}
