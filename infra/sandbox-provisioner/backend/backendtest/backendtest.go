// Package backendtest is the contract every sandbox backend passes: create
// and reuse, exec output and exit codes, timeouts, the output cap, files
// that outlive Destroy, and the escape and limit tests (other threads'
// files unreachable, `..`/absolute/symlink/`/proc/<pid>/root` escapes, no
// network but loopback, read-only skills, fork bomb / memory hog / disk
// filler / CPU spinner stopped with the host healthy, a non-root uid).
//
// A backend's test calls Run with a constructor and a volume directory it
// may use (the suite lays out scopes below it as the provisioner does).
// Commands are plain POSIX sh with busybox-level tools, so a minimal image
// passes too. No test sends traffic off this machine: the network checks
// dial 127.0.0.1 only.
//
// Imported by: backend tests only. May import: infra/sandbox-provisioner/backend,
// infra/sandbox-provisioner/volume and testing.
package backendtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

// Fixture is one sandbox the suite made: its spec and host directories.
type Fixture struct {
	Spec backend.Spec
	Dirs volume.Dirs
}

// NewFixture lays out a fresh scope on volumeDir (owned by the sandbox uid
// when the test runs as root) and returns its Spec with limits.
func NewFixture(t *testing.T, volumeDir string, limits backend.Limits) Fixture {
	t.Helper()
	owner := volume.Owner{UID: -1, GID: -1}
	if os.Geteuid() == 0 {
		owner = volume.Owner{UID: backend.SandboxUID, GID: backend.SandboxGID}
	}
	l := volume.Layout{Root: volumeDir, Owner: owner}
	s := volume.Scope{UID: "u" + randHex(), FileThread: "t" + randHex(), SkillsThread: "s" + randHex()}
	mounts, err := l.Prepare(s)
	if err != nil {
		t.Fatalf("prepare volume: %v", err)
	}
	return Fixture{
		Spec: backend.Spec{ID: s.SandboxID(), UID: s.UID, FileThread: s.FileThread, SkillsThread: s.SkillsThread,
			Env: map[string]string{"YUXI_TEST_ENV": "from-spec"}, Mounts: mounts, Limits: limits},
		Dirs: l.DirsOf(s),
	}
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run runs the contract against backends made by newBackend (called once
// per subtest; the suite destroys what it creates). volumeDir must be a
// directory the backend can bind from; the suite makes it traversable.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend, volumeDir string) {
	if err := os.MkdirAll(volumeDir, 0o711); err != nil {
		t.Fatal(err)
	}
	// Parents the sandbox uid must traverse to reach its mount sources
	// (t.TempDir makes them 0700).
	for d := volumeDir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 && os.Geteuid() == 0 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
	s := &suite{newBackend: newBackend, volume: volumeDir}
	t.Run("EnsureReuseList", s.ensureReuseList)
	t.Run("ExecOutputAndExitCode", s.execOutputAndExit)
	t.Run("Timeout", s.timeout)
	t.Run("OutputCap", s.outputCap)
	t.Run("FilesOutliveDestroy", s.filesOutliveDestroy)
	t.Run("OtherThreadsUnreachable", s.otherThreadsUnreachable)
	t.Run("PathEscapes", s.pathEscapes)
	t.Run("NoNetwork", s.noNetwork)
	t.Run("SkillsReadOnly", s.skillsReadOnly)
	t.Run("NonRoot", s.nonRoot)
	t.Run("ForkBomb", s.forkBomb)
	t.Run("MemoryHog", s.memoryHog)
	t.Run("DiskFiller", s.diskFiller)
	t.Run("CPUSpinner", s.cpuSpinner)
}

type suite struct {
	newBackend func(t *testing.T) backend.Backend
	volume     string
}

// start makes a backend and an ensured sandbox destroyed at cleanup.
func (s *suite) start(t *testing.T, limits backend.Limits) (backend.Backend, Fixture) {
	t.Helper()
	b := s.newBackend(t)
	f := NewFixture(t, s.volume, limits)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.Ensure(ctx, f.Spec); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	t.Cleanup(func() { _ = b.Destroy(context.Background(), f.Spec.ID) })
	return b, f
}

func run(t *testing.T, b backend.Backend, id, cmd string, timeout time.Duration) backend.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	res, err := b.Exec(ctx, id, backend.ExecRequest{Command: cmd, Timeout: timeout})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

func (s *suite) ensureReuseList(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	ctx := context.Background()
	// A marker in the sandbox's tmp survives a second Ensure only when it
	// reused the sandbox; either way Ensure must succeed and not duplicate.
	if err := b.Ensure(ctx, f.Spec); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	ids, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := countOf(ids, f.Spec.ID); n != 1 {
		t.Fatalf("List after two Ensures has %s %d times: %v", f.Spec.ID, n, ids)
	}
	if err := b.Destroy(ctx, f.Spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, f.Spec.ID); err != nil {
		t.Fatalf("destroying a destroyed sandbox: %v", err)
	}
	ids, _ = b.List(ctx)
	if slices.Contains(ids, f.Spec.ID) {
		t.Fatalf("List after Destroy still has %s", f.Spec.ID)
	}
	if _, err := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err == nil {
		t.Fatal("exec in a destroyed sandbox succeeded; want ErrNotFound")
	}
}

func countOf(ids []string, id string) (n int) {
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

func (s *suite) execOutputAndExit(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	res := run(t, b, f.Spec.ID, `echo out; echo err >&2; pwd; echo "$YUXI_TEST_ENV"; exit 7`, 30*time.Second)
	out := string(res.Output)
	if res.ExitCode != 7 || res.TimedOut || res.Truncated {
		t.Fatalf("exit %d timedOut %v truncated %v, want 7 false false; output %q", res.ExitCode, res.TimedOut, res.Truncated, out)
	}
	for _, want := range []string{"out\n", "err\n", backend.WorkspaceDir + "\n", "from-spec\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	ctx := context.Background()
	r2, err := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: `pwd; echo "$EXTRA"`, Workdir: backend.OutputsDir,
		Timeout: 30 * time.Second, Env: map[string]string{"EXTRA": "per-call"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r2.Output); got != backend.OutputsDir+"\nper-call\n" || r2.ExitCode != 0 {
		t.Fatalf("workdir/env exec: exit %d output %q", r2.ExitCode, got)
	}
}

func (s *suite) timeout(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	res := run(t, b, f.Spec.ID, `echo started; sleep 60; echo never`, 2*time.Second)
	if !res.TimedOut {
		t.Fatalf("sleep 60 with a 2s timeout: TimedOut false, exit %d output %q", res.ExitCode, res.Output)
	}
	if strings.Contains(string(res.Output), "never") || !strings.Contains(string(res.Output), "started") {
		t.Fatalf("timed-out output %q", res.Output)
	}
	// The sandbox stays usable and the sleeper is gone.
	res = run(t, b, f.Spec.ID, `echo again`, 30*time.Second)
	if string(res.Output) != "again\n" || res.ExitCode != 0 {
		t.Fatalf("exec after a timeout: exit %d output %q", res.ExitCode, res.Output)
	}
}

func (s *suite) outputCap(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	res := run(t, b, f.Spec.ID, `head -c 300000 /dev/zero; echo tail-marker >&2`, 60*time.Second)
	if len(res.Output) != backend.DefaultOutput || !res.Truncated || res.ExitCode != 0 {
		t.Fatalf("300000 bytes with the default cap: got %d bytes, truncated %v, exit %d", len(res.Output), res.Truncated, res.ExitCode)
	}
	ctx := context.Background()
	r2, err := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: `echo 0123456789abcdef`, MaxOutput: 10, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if string(r2.Output) != "0123456789" || !r2.Truncated {
		t.Fatalf("cap 10: output %q truncated %v", r2.Output, r2.Truncated)
	}
	r3, _ := b.Exec(ctx, f.Spec.ID, backend.ExecRequest{Command: `printf 12345`, MaxOutput: 5, Timeout: 30 * time.Second})
	if string(r3.Output) != "12345" || r3.Truncated {
		t.Fatalf("exactly the cap: output %q truncated %v", r3.Output, r3.Truncated)
	}
}

func (s *suite) filesOutliveDestroy(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	res := run(t, b, f.Spec.ID, `echo kept > `+backend.OutputsDir+`/a.txt && echo ws > `+backend.WorkspaceDir+`/w.txt && echo up > `+backend.UploadsDir+`/u.txt && echo gone > /tmp/t.txt`, 30*time.Second)
	if res.ExitCode != 0 {
		t.Fatalf("write: exit %d %q", res.ExitCode, res.Output)
	}
	for path, want := range map[string]string{filepath.Join(f.Dirs.Outputs, "a.txt"): "kept\n", filepath.Join(f.Dirs.Workspace, "w.txt"): "ws\n", filepath.Join(f.Dirs.Uploads, "u.txt"): "up\n"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("host file %s: %q %v", path, got, err)
		}
	}
	ctx := context.Background()
	if err := b.Destroy(ctx, f.Spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Ensure(ctx, f.Spec); err != nil {
		t.Fatal(err)
	}
	res = run(t, b, f.Spec.ID, `cat `+backend.OutputsDir+`/a.txt `+backend.WorkspaceDir+`/w.txt; cat /tmp/t.txt 2>/dev/null || echo no-tmp`, 30*time.Second)
	if string(res.Output) != "kept\nws\nno-tmp\n" {
		t.Fatalf("after Destroy+Ensure: %q", res.Output)
	}
}

// secretFixture writes a secret into another scope's directories and
// returns its host paths.
func (s *suite) secretFixture(t *testing.T) (Fixture, []string) {
	other := NewFixture(t, s.volume, backend.Limits{})
	var paths []string
	for _, d := range []string{other.Dirs.Outputs, other.Dirs.Workspace, other.Dirs.Uploads, other.Dirs.Skills} {
		p := filepath.Join(d, "secret.txt")
		if err := os.WriteFile(p, []byte("SECRET-OF-ANOTHER-THREAD\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return other, paths
}

func (s *suite) otherThreadsUnreachable(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	other, paths := s.secretFixture(t)
	cmd := "for p in " + strings.Join(paths, " ") + " " + s.volume + "/threads; do cat \"$p\" 2>/dev/null; ls -R \"$p\" 2>/dev/null; done;" +
		" ls -a /home/gem/user-data; find / -xdev -name secret.txt 2>/dev/null; grep -rs SECRET-OF-ANOTHER /home /tmp 2>/dev/null; true"
	res := run(t, b, f.Spec.ID, cmd, 60*time.Second)
	if strings.Contains(string(res.Output), "SECRET-OF-ANOTHER") || strings.Contains(string(res.Output), other.Spec.FileThread) ||
		strings.Contains(string(res.Output), "secret.txt") {
		t.Fatalf("another thread's files are visible from the sandbox:\n%s", res.Output)
	}
}

func (s *suite) pathEscapes(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	_, paths := s.secretFixture(t)
	secret := paths[0]
	rel := strings.Repeat("../", 12) + strings.TrimPrefix(secret, "/")
	cmds := []string{
		"cat " + rel, // .. from the workdir
		"cat " + backend.OutputsDir + "/../../../../" + strings.TrimPrefix(secret, "/"),
		"cat " + secret, // absolute host path
		"ln -s " + secret + " " + backend.OutputsDir + "/link && cat " + backend.OutputsDir + "/link",
		"ln -s / " + backend.OutputsDir + "/rootlink && cat " + backend.OutputsDir + "/rootlink" + secret,
		"for p in /proc/[0-9]*; do cat $p/root" + secret + "; done",
		"cat /proc/1/root" + secret + " /proc/self/root" + secret,
		"cat /proc/1/cwd/" + rel,
	}
	for _, c := range cmds {
		res := run(t, b, f.Spec.ID, c+" 2>&1; echo rc=$?", 30*time.Second)
		if strings.Contains(string(res.Output), "SECRET-OF-ANOTHER") {
			t.Errorf("escape %q read the secret:\n%s", c, res.Output)
		}
	}
	// The host still has the sandbox's symlinks as plain links inside its
	// outputs, never followed outside by anything the backend does.
	if fi, err := os.Lstat(filepath.Join(f.Dirs.Outputs, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("symlink made in the sandbox: %v %v", fi, err)
	}
}

func (s *suite) noNetwork(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	// A host listener on loopback: nothing from the sandbox may reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res := run(t, b, f.Spec.ID, `cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`, 30*time.Second)
	ifaces := strings.Fields(string(res.Output))
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Fatalf("interfaces in the sandbox: %q, want only lo", res.Output)
	}
	// Dial the host's Postgres port and our listener: bash's /dev/tcp,
	// else busybox/openbsd nc; each attempt must fail.
	for _, p := range []int{5432, port} {
		dial := dialCmd("127.0.0.1", p)
		res := run(t, b, f.Spec.ID, dial, 30*time.Second)
		if !strings.Contains(string(res.Output), "dial-failed") || strings.Contains(string(res.Output), "dial-ok") {
			t.Fatalf("connect to 127.0.0.1:%d from the sandbox: %q", p, res.Output)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the sandbox", n)
	}
	// And the host's loopback listener itself works (the check is not vacuous).
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func dialCmd(host string, port int) string {
	p := itoa(port)
	return `if command -v bash >/dev/null 2>&1; then bash -c 'exec 3<>/dev/tcp/` + host + `/` + p + `' 2>/dev/null && echo dial-ok || echo dial-failed;` +
		` elif command -v nc >/dev/null 2>&1; then nc -w 2 ` + host + ` ` + p + ` </dev/null >/dev/null 2>&1 && echo dial-ok || echo dial-failed;` +
		` else echo no-dialer; fi`
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func (s *suite) skillsReadOnly(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	if err := os.WriteFile(filepath.Join(f.Dirs.Skills, "SKILL.md"), []byte("skill text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, b, f.Spec.ID, `cat `+backend.SkillsDir+`/SKILL.md; exec 2>/dev/null; echo x > `+backend.SkillsDir+`/new.txt 2>/dev/null && echo wrote-new;`+
		` echo x >> `+backend.SkillsDir+`/SKILL.md 2>/dev/null && echo appended; rm -f `+backend.SkillsDir+`/SKILL.md 2>/dev/null && echo removed;`+
		` mkdir `+backend.SkillsDir+`/d 2>/dev/null && echo mkdir; true`, 30*time.Second)
	if string(res.Output) != "skill text\n" {
		t.Fatalf("skills dir is writable from the sandbox: %q", res.Output)
	}
	if got, _ := os.ReadFile(filepath.Join(f.Dirs.Skills, "SKILL.md")); string(got) != "skill text\n" {
		t.Fatalf("SKILL.md on the host changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.Dirs.Skills, "new.txt")); err == nil {
		t.Fatal("a file appeared in the skills dir")
	}
}

func (s *suite) nonRoot(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{})
	res := run(t, b, f.Spec.ID, `id -u; id -g; touch `+backend.OutputsDir+`/owned`, 30*time.Second)
	fields := strings.Fields(string(res.Output))
	if len(fields) < 2 || fields[0] == "0" || fields[1] == "0" {
		t.Fatalf("uid/gid inside the sandbox: %q", res.Output)
	}
	fi, err := os.Stat(filepath.Join(f.Dirs.Outputs, "owned"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid == 0 || st.Gid == 0 {
		t.Fatalf("a file the sandbox created is owned by %d:%d on the host", st.Uid, st.Gid)
	}
}

// hostHealthy: after an abuse test the same sandbox and a fresh one still
// run commands promptly (the abuser's processes are gone).
func (s *suite) hostHealthy(t *testing.T, b backend.Backend, id string) {
	t.Helper()
	res := run(t, b, id, `echo alive`, 60*time.Second)
	if string(res.Output) != "alive\n" || res.ExitCode != 0 {
		t.Fatalf("the sandbox after abuse: exit %d output %q", res.ExitCode, res.Output)
	}
	b2, f2 := s.start(t, backend.Limits{})
	res = run(t, b2, f2.Spec.ID, `echo alive`, 60*time.Second)
	if string(res.Output) != "alive\n" {
		t.Fatalf("a fresh sandbox after abuse: %q", res.Output)
	}
}

func (s *suite) forkBomb(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{Pids: 64, MemoryBytes: 256 << 20})
	res := run(t, b, f.Spec.ID, `bomb() { bomb | bomb & }; bomb; sleep 3; echo survived`, 8*time.Second)
	out := strings.ToLower(string(res.Output))
	t.Logf("fork bomb: exit %d timedOut %v, %d bytes of output", res.ExitCode, res.TimedOut, len(res.Output))
	if !strings.Contains(out, "fork") && !strings.Contains(out, "resource temporarily unavailable") && !res.TimedOut {
		t.Fatalf("fork bomb under pids 64: no fork failure and no timeout: exit %d output %q", res.ExitCode, res.Output)
	}
	s.hostHealthy(t, b, f.Spec.ID)
}

func (s *suite) memoryHog(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{MemoryBytes: 64 << 20})
	// Doubles a string until it is 1 GiB: far over the 64 MiB limit.
	res := run(t, b, f.Spec.ID, `awk 'BEGIN { s = "x"; while (length(s) < 1073741824) s = s s; print "allocated" }'; echo "rc=$?"`, 60*time.Second)
	out := string(res.Output)
	t.Logf("memory hog: exit %d output %q", res.ExitCode, out)
	if strings.Contains(out, "allocated") || strings.Contains(out, "rc=0") {
		t.Fatalf("a 1 GiB allocation under a 64 MiB limit succeeded: %q", out)
	}
	s.hostHealthy(t, b, f.Spec.ID)
}

func (s *suite) diskFiller(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{FileSizeBytes: 8 << 20})
	res := run(t, b, f.Spec.ID, `dd if=/dev/zero of=`+backend.OutputsDir+`/fill bs=1048576 count=100 2>&1; echo "rc=$?"`, 60*time.Second)
	t.Logf("disk filler: %q", res.Output)
	if strings.Contains(string(res.Output), "rc=0") {
		t.Fatalf("writing 100 MiB under an 8 MiB file size limit succeeded: %q", res.Output)
	}
	fi, err := os.Stat(filepath.Join(f.Dirs.Outputs, "fill"))
	if err == nil && fi.Size() > 8<<20 {
		t.Fatalf("the filler wrote %d bytes", fi.Size())
	}
	s.hostHealthy(t, b, f.Spec.ID)
}

func (s *suite) cpuSpinner(t *testing.T) {
	t.Parallel()
	b, f := s.start(t, backend.Limits{CPUSeconds: 1})
	res := run(t, b, f.Spec.ID, `while :; do :; done`, 60*time.Second)
	t.Logf("cpu spinner: exit %d timedOut %v output %q", res.ExitCode, res.TimedOut, res.Output)
	if res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("a spinner under a 1s CPU limit: timedOut %v exit %d (want killed by the CPU limit before the 60s timeout)", res.TimedOut, res.ExitCode)
	}
	s.hostHealthy(t, b, f.Spec.ID)
}
