package docker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker/dockertest"
)

// world is one provisioner instance on a real engine with its own volume.
type world struct {
	t   *testing.T
	b   *docker.Backend
	vol string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newWorld(t *testing.T, mod func(*docker.Config)) *world {
	t.Helper()
	host := dockertest.Engine(t)
	cfg := docker.Config{
		Host:     host,
		Image:    dockertest.Image(t, host),
		Instance: "test-" + randHex(6),
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, b: b, vol: t.TempDir()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ids, err := b.List(ctx)
		if err != nil {
			t.Errorf("cleanup list: %v", err)
		}
		for _, id := range ids {
			if err := b.Destroy(ctx, id); err != nil {
				t.Errorf("cleanup %s: %v", id, err)
			}
		}
	})
	return w
}

// spec lays out the volume as the original does and returns the sandbox spec.
func (w *world) spec(id, uid, fileThread, skillsThread string) backend.Spec {
	td := filepath.Join(w.vol, "threads")
	m := []backend.Mount{
		{HostPath: filepath.Join(td, "shared", uid, "workspace"), SandboxPath: "/home/gem/user-data/workspace"},
		{HostPath: filepath.Join(td, fileThread, "user-data", "uploads"), SandboxPath: "/home/gem/user-data/uploads"},
		{HostPath: filepath.Join(td, fileThread, "user-data", "outputs"), SandboxPath: "/home/gem/user-data/outputs"},
		{HostPath: filepath.Join(td, skillsThread, "skills"), SandboxPath: "/home/gem/skills", ReadOnly: true},
	}
	for _, mt := range m {
		if err := os.MkdirAll(mt.HostPath, 0o755); err != nil {
			w.t.Fatal(err)
		}
	}
	return backend.Spec{ID: id, UID: uid, FileThread: fileThread, SkillsThread: skillsThread,
		Env: map[string]string{"AGENT_VAR": "v-" + uid}, Mounts: m}
}

func (w *world) ensure(s backend.Spec) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.b.Ensure(ctx, s); err != nil {
		w.t.Fatalf("ensure %s: %v", s.ID, err)
	}
}

func (w *world) exec(id, cmd string, timeout time.Duration) backend.ExecResult {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := w.b.Exec(ctx, id, backend.ExecRequest{Command: cmd, Timeout: timeout, Workdir: backend.UserDataDir})
	if err != nil {
		w.t.Fatalf("exec %q: %v", cmd, err)
	}
	return res
}

// ok runs cmd and fails the test unless it exits 0; it returns the output.
func (w *world) ok(id, cmd string) string {
	w.t.Helper()
	res := w.exec(id, cmd, time.Minute)
	if res.ExitCode != 0 {
		w.t.Fatalf("%q exited %d: %s", cmd, res.ExitCode, res.Output)
	}
	return string(res.Output)
}

// fails runs cmd and fails the test when it exits 0.
func (w *world) fails(id, cmd string) string {
	w.t.Helper()
	res := w.exec(id, cmd, time.Minute)
	if res.ExitCode == 0 {
		w.t.Fatalf("%q succeeded, want a failure; output: %s", cmd, res.Output)
	}
	return string(res.Output)
}

func TestLifecycleReuseAndRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-life", "u1", "ft1", "st1")
	w.ensure(s)
	if got := w.ok(s.ID, `echo "$AGENT_VAR" > outputs/a.txt && cat outputs/a.txt && pwd`); got != "v-u1\n/home/gem/user-data\n" {
		t.Fatalf("output %q", got)
	}
	// The file is on the volume.
	if b, err := os.ReadFile(filepath.Join(w.vol, "threads/ft1/user-data/outputs/a.txt")); err != nil || string(b) != "v-u1\n" {
		t.Fatalf("volume file %q, %v", b, err)
	}
	ctx := context.Background()
	ids, err := w.b.List(ctx)
	if err != nil || len(ids) != 1 || ids[0] != s.ID {
		t.Fatalf("list %v, %v", ids, err)
	}
	// A second Ensure reuses the running container: its tmpfs file stays.
	w.ok(s.ID, `echo warm > /home/gem/marker`)
	w.ensure(s)
	if got := w.ok(s.ID, `cat /home/gem/marker`); got != "warm\n" {
		t.Fatalf("container was not reused: %q", got)
	}
	// A new provisioner (same instance label) finds it again after a restart.
	b2, err := docker.New(docker.Config{Host: dockertest.Engine(t), Image: "x", Instance: instanceOf(t, w)})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := b2.List(ctx); len(ids) != 1 || ids[0] != s.ID {
		t.Fatalf("restarted provisioner lists %v", ids)
	}
	// A changed spec (new per-user env) replaces the container; files stay.
	s.Env["AGENT_VAR"] = "changed"
	w.ensure(s)
	if got := w.ok(s.ID, `echo "$AGENT_VAR"; cat outputs/a.txt; cat /home/gem/marker 2>/dev/null || echo fresh`); got != "changed\nv-u1\nfresh\n" {
		t.Fatalf("after respec: %q", got)
	}
	if err := w.b.Destroy(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.b.Destroy(ctx, s.ID); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if ids, _ := w.b.List(ctx); len(ids) != 0 {
		t.Fatalf("after destroy list %v", ids)
	}
	if _, err := w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: "true"}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("exec in destroyed sandbox: %v", err)
	}
	// Recreated on demand, the files are still there.
	w.ensure(s)
	if got := w.ok(s.ID, `cat outputs/a.txt`); got != "v-u1\n" {
		t.Fatalf("after recreate: %q", got)
	}
}

// instanceOf reads the instance label the world's backend stamps.
func instanceOf(t *testing.T, w *world) string {
	t.Helper()
	var ci struct {
		Config struct{ Labels map[string]string }
	}
	if err := getJSON(w, "/containers/"+w.b.ContainerName("sb-life")+"/json", &ci); err != nil {
		t.Fatal(err)
	}
	return ci.Config.Labels[docker.LabelInstance]
}

func getJSON(w *world, path string, out any) error {
	return w.b.Client().Get(context.Background(), path, out)
}

func TestExecOutputExitCodeAndCap(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-exec", "u1", "ft1", "st1")
	w.ensure(s)
	ctx := context.Background()
	res, err := w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `echo out; echo err >&2; echo "$X"; exit 3`, Env: map[string]string{"X": "from-request"}, Workdir: "/home/gem/user-data/outputs"})
	if err != nil || res.ExitCode != 3 || string(res.Output) != "out\nerr\nfrom-request\n" || res.Truncated || res.TimedOut {
		t.Fatalf("res %+v %q, %v", res, res.Output, err)
	}
	res, err = w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `head -c 300000 /dev/zero | tr '\0' a; echo; echo done >&2`, MaxOutput: 1000})
	if err != nil || res.ExitCode != 0 || len(res.Output) != 1000 || !res.Truncated || strings.Trim(string(res.Output), "a") != "" {
		t.Fatalf("capped res exit %d len %d truncated %v, %v", res.ExitCode, len(res.Output), res.Truncated, err)
	}
	// The default directory is the workspace.
	res, err = w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `pwd`})
	if err != nil || string(res.Output) != backend.WorkspaceDir+"\n" {
		t.Fatalf("default workdir %q, %v", res.Output, err)
	}
	// The default cap is the original's 262144 bytes.
	res, err = w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `head -c 300000 /dev/zero`})
	if err != nil || len(res.Output) != backend.DefaultOutput || !res.Truncated {
		t.Fatalf("default cap: len %d truncated %v, %v", len(res.Output), res.Truncated, err)
	}
}

func TestExecTimeoutKillsTheCommand(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-timeout", "u1", "ft1", "st1")
	w.ensure(s)
	res := w.exec(s.ID, `echo started; sleep 300 & sleep 301; echo never`, 2*time.Second)
	if !res.TimedOut || string(res.Output) != "started\n" {
		t.Fatalf("res %+v %q", res, res.Output)
	}
	// Neither the command nor its background child survives.
	if got := w.ok(s.ID, `ps -o comm,args | grep -c '[s]leep 30' || true`); got != "0\n" {
		t.Fatalf("sleeps left: %q", got)
	}
	// The caller's own cancellation also stops the command.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(500 * time.Millisecond); cancel() }()
	if _, err := w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `sleep 302`}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled exec: %v", err)
	}
	if got := w.ok(s.ID, `ps -o args | grep -c '[s]leep 302' || true`); got != "0\n" {
		t.Fatalf("sleep left after cancel: %q", got)
	}
}

// TestEscapes: from inside a sandbox, another thread's and another user's
// files cannot be reached by any path.
func TestEscapes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	mine := w.spec("sb-mine", "alice", "ft-alice", "st-alice")
	theirs := w.spec("sb-theirs", "bob", "ft-bob", "st-bob")
	w.ensure(mine)
	w.ensure(theirs)
	secret := "SECRET-" + randHex(8)
	w.ok(theirs.ID, `echo `+secret+` > outputs/secret.txt; echo `+secret+` > workspace/ws.txt`)
	bobFile := filepath.Join(w.vol, "threads/ft-bob/user-data/outputs/secret.txt")
	if _, err := os.Stat(bobFile); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		`cat ` + bobFile,
		`cat /home/gem/user-data/outputs/../../../../..` + bobFile,
		`cat ../../../../../../` + bobFile,
		`cat /proc/1/root` + bobFile,
		`cat /proc/self/root` + bobFile,
		`ln -s ` + bobFile + ` outputs/link && cat outputs/link`,
		`ln -s / outputs/root && cat outputs/root` + bobFile,
		`cat /home/gem/user-data/outputs/../../../../` + filepath.Join(w.vol, "threads/shared/bob/workspace/ws.txt"),
		`ls ` + w.vol,
	} {
		if out := w.fails(mine.ID, cmd); strings.Contains(out, secret) {
			t.Fatalf("%q leaked: %s", cmd, out)
		}
	}
	// Nothing anywhere in the sandbox's file system holds the secret.
	out := w.exec(mine.ID, `find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null | xargs grep -l `+secret+` 2>/dev/null; echo scanned`, time.Minute)
	if string(out.Output) != "scanned\n" {
		t.Fatalf("secret found: %s", out.Output)
	}
	// Bob's own sandbox sees his files; Alice's mounts are hers only.
	if got := w.ok(theirs.ID, `cat outputs/secret.txt`); got != secret+"\n" {
		t.Fatalf("bob reads %q", got)
	}
	if got := w.ok(mine.ID, `ls -A outputs workspace uploads | grep -v -e '^$' -e ':$' -e '^link$' -e '^root$' | wc -l`); strings.TrimSpace(got) != "0" {
		t.Fatalf("alice sees files: %q", got)
	}
	// Writable only under the three user-data roots.
	for _, p := range []string{"/etc/x", "/bin/x", "/home/gem/user-data/x", "/usr/bin/x"} {
		w.fails(mine.ID, `touch `+p)
	}
	w.ok(mine.ID, `touch /home/gem/user-data/workspace/x /home/gem/user-data/uploads/x /home/gem/user-data/outputs/x /home/gem/x /tmp/x`)
}

func TestSkillsAreReadOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-skills", "u1", "ft1", "st1")
	skill := filepath.Join(w.vol, "threads/st1/skills/demo/SKILL.md")
	if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(skill, []byte("# demo\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(skill), 0o777); err != nil { // writable by anyone on the host: the mount still refuses
		t.Fatal(err)
	}
	w.ensure(s)
	if got := w.ok(s.ID, `cat /home/gem/skills/demo/SKILL.md`); got != "# demo\n" {
		t.Fatalf("skill %q", got)
	}
	for _, cmd := range []string{`touch /home/gem/skills/new`, `echo x > /home/gem/skills/demo/SKILL.md`, `rm /home/gem/skills/demo/SKILL.md`, `mkdir /home/gem/skills/demo/d`} {
		if out := w.fails(s.ID, cmd); !strings.Contains(out, "Read-only file system") {
			t.Fatalf("%q: %s", cmd, out)
		}
	}
	if b, _ := os.ReadFile(skill); string(b) != "# demo\n" {
		t.Fatalf("skill changed: %q", b)
	}
}

// TestNonRootNoPrivileges: uid 1000 inside and outside, no capabilities,
// no-new-privileges set, read-only root.
func TestNonRootNoPrivileges(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-user", "u1", "ft1", "st1")
	w.ensure(s)
	if got := w.ok(s.ID, `id -u; id -g`); got != "1000\n1000\n" {
		t.Fatalf("ids %q", got)
	}
	st := w.ok(s.ID, `cat /proc/self/status`)
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Uid:\t1000\t1000\t1000\t1000"} {
		if !strings.Contains(st, want) {
			t.Fatalf("status lacks %q:\n%s", want, st)
		}
	}
	// On the host, every process of the sandbox runs as uid 1000, PID 1 too.
	var ci struct {
		State struct{ Pid int }
	}
	if err := getJSON(w, "/containers/"+w.b.ContainerName(s.ID)+"/json", &ci); err != nil || ci.State.Pid == 0 {
		t.Fatalf("inspect: %+v %v", ci, err)
	}
	hs, err := os.ReadFile("/proc/" + strconv.Itoa(ci.State.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hs), "\nUid:\t1000\t1000\t1000\t1000\n") {
		t.Fatalf("host view of PID 1:\n%s", hs)
	}
	w.fails(s.ID, `mount -t tmpfs none /tmp`)
	w.fails(s.ID, `chroot / true`)
}

// TestNoNetwork: the sandbox has only a loopback interface, and neither a
// host service on 127.0.0.1 (PostgreSQL's 5432, a listener the test opens
// standing in for the provisioner) nor anything else can be reached.
func TestNoNetwork(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-net", "u1", "ft1", "st1")
	w.ensure(s)
	ifaces := w.ok(s.ID, `ls /sys/class/net`)
	if ifaces != "lo\n" {
		t.Fatalf("interfaces: %q", ifaces)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = http.Serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if c, err := net.Dial("tcp", "127.0.0.1:"+port); err != nil { // reachable from the host itself
		t.Fatal(err)
	} else {
		c.Close()
	}
	for _, addr := range []string{"127.0.0.1 5432", "127.0.0.1 " + port} {
		if out := w.fails(s.ID, `nc -w 2 `+addr+` </dev/null`); strings.Contains(out, "open") {
			t.Fatalf("connect %s: %s", addr, out)
		}
	}
	if got := w.ok(s.ID, `cat /proc/net/route | wc -l`); got != "1\n" { // only the header line: no routes
		t.Fatalf("routes: %q", got)
	}
}

// TestInternalNetwork: in NetworkInternal mode each sandbox gets its own
// internal bridge network, labelled, with no route out.
func TestInternalNetwork(t *testing.T) {
	t.Parallel()
	// A stand-in for the provisioner's own container (on a network of its own).
	prov := newWorld(t, func(c *docker.Config) {
		c.Network = docker.NetworkInternal
		c.Prefix = "yuxi-sbprov-" + randHex(3) + "-"
	})
	ps := prov.spec("provisioner", "p", "ftp", "stp")
	prov.ensure(ps)
	provName := prov.b.ContainerName(ps.ID)
	w := newWorld(t, func(c *docker.Config) {
		c.Network = docker.NetworkInternal
		c.Prefix = "yuxi-sbtest-" + randHex(3) + "-"
		c.NetworkPrefix = "yuxi-sbnet-" + randHex(3) + "-"
		c.ProvisionerContainer = provName
	})
	a := w.spec("sb-a", "u1", "ft1", "st1")
	b := w.spec("sb-b", "u2", "ft2", "st2")
	w.ensure(a)
	w.ensure(b)
	var n struct {
		Internal   bool
		Labels     map[string]string
		Containers map[string]struct{ Name, IPv4Address string }
		IPAM       struct{ Config []struct{ Gateway string } }
	}
	if err := getJSON(w, "/networks/"+w.b.NetworkName(a.ID), &n); err != nil {
		t.Fatal(err)
	}
	if !n.Internal || n.Labels[docker.LabelID] != a.ID || len(n.Containers) != 2 {
		t.Fatalf("network %+v", n)
	}
	names := []string{}
	for _, c := range n.Containers {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	want := []string{w.b.ContainerName(a.ID), provName}
	sort.Strings(want)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("network members %v, want %v", names, want)
	}
	// The provisioner reaches the sandbox over it (here: an exec agent stand-in).
	w.ok(a.ID, `(nc -l -p 8080 -e echo pong </dev/null >/dev/null 2>&1 &); sleep 0.3`)
	ip := strings.Split(n.Containers[mustID(t, w, a.ID)].IPv4Address, "/")[0]
	if got := prov.ok(ps.ID, `nc -w 3 `+ip+` 8080 </dev/null`); got != "pong\n" {
		t.Fatalf("provisioner to sandbox: %q", got)
	}
	if got := w.ok(a.ID, `ls /sys/class/net | tr '\n' ' '`); got != "eth0 lo " {
		t.Fatalf("interfaces %q", got)
	}
	// The engine's own isolation (iptables) keeps sandbox networks apart and
	// off the host's other networks; the private test daemon runs without
	// iptables, so this test checks the objects, not that isolation. The
	// default NetworkNone mode is what the escape tests assert.
	w.fails(a.ID, `nc -w 2 127.0.0.1 5432 </dev/null`)
	if len(nb(t, w, b.ID)) != 2 {
		t.Fatal("sandbox b's network holds more than it and the provisioner")
	}
	ctx := context.Background()
	if err := w.b.Destroy(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := getJSON(w, "/networks/"+w.b.NetworkName(a.ID), &n); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("network after destroy: %v", err)
	}
	ids, _ := w.b.List(ctx)
	if fmt.Sprint(ids) != "[sb-b]" {
		t.Fatalf("list %v", ids)
	}
	// The provisioner left a's network and still runs.
	if got := prov.ok(ps.ID, `echo up`); got != "up\n" {
		t.Fatal(got)
	}
	if len(nb(t, w, b.ID)) != 2 {
		t.Fatal("b's network lost the provisioner")
	}
}

func nb(t *testing.T, w *world, id string) map[string]any {
	t.Helper()
	var n struct{ Containers map[string]any }
	if err := getJSON(w, "/networks/"+w.b.NetworkName(id), &n); err != nil {
		t.Fatal(err)
	}
	return n.Containers
}

// TestImageCommandIsReplaced: an image whose entrypoint is something else
// (the production image's exec agent) still becomes a working sandbox.
func TestImageCommandIsReplaced(t *testing.T) {
	t.Parallel()
	host := dockertest.Engine(t)
	rootfs, err := dockertest.BusyboxRootfs()
	if err != nil {
		t.Fatal(err)
	}
	c, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	ref := "yuxi-sandbox-test-entrypoint:" + randHex(4)
	ctx := context.Background()
	if err := c.ImportImage(ctx, ref, bytes.NewReader(rootfs), `ENTRYPOINT ["/bin/false"]`, `CMD ["--never"]`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), "/images/"+ref) })
	w := newWorld(t, func(cfg *docker.Config) { cfg.Image = ref })
	s := w.spec("sb-ep", "u1", "ft1", "st1")
	w.ensure(s)
	if got := w.ok(s.ID, `echo up`); got != "up\n" {
		t.Fatalf("got %q", got)
	}
}

func mustID(t *testing.T, w *world, id string) string {
	t.Helper()
	var ci struct{ Id string }
	if err := getJSON(w, "/containers/"+w.b.ContainerName(id)+"/json", &ci); err != nil {
		t.Fatal(err)
	}
	return ci.Id
}

// TestVolumeRootTranslation: when the provisioner sees the volume at
// another path than the Docker host (DOCKER_THREADS_HOST_PATH), mount
// sources are handed to the engine under the host's path.
func TestVolumeRootTranslation(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	view := filepath.Join(t.TempDir(), "view")
	if err := os.Symlink(real, view); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, func(c *docker.Config) { c.VolumeRoot, c.HostVolumeRoot = view, real })
	w.vol = view
	s := w.spec("sb-translate", "u1", "ft1", "st1")
	w.ensure(s)
	w.ok(s.ID, `echo hi > outputs/x`)
	var ci struct {
		Mounts []struct{ Source, Destination string }
	}
	if err := getJSON(w, "/containers/"+w.b.ContainerName(s.ID)+"/json", &ci); err != nil {
		t.Fatal(err)
	}
	for _, m := range ci.Mounts {
		if m.Destination == backend.OutputsDir && m.Source != filepath.Join(real, "threads/ft1/user-data/outputs") {
			t.Fatalf("outputs mounted from %s", m.Source)
		}
	}
	if b, err := os.ReadFile(filepath.Join(real, "threads/ft1/user-data/outputs/x")); err != nil || string(b) != "hi\n" {
		t.Fatalf("%q %v", b, err)
	}
	// A source outside the volume is refused.
	s2 := w.spec("sb-outside", "u1", "ft2", "st1")
	s2.Mounts[0].HostPath = t.TempDir()
	if err := w.b.Ensure(context.Background(), s2); err == nil || !strings.Contains(err.Error(), "outside the volume") {
		t.Fatalf("outside source: %v", err)
	}
}

func TestMissingImageIsAClearError(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *docker.Config) { c.Image = "yuxi-sandbox-absent:" + randHex(4) })
	err := w.b.Ensure(context.Background(), w.spec("sb-noimage", "u1", "ft1", "st1"))
	if err == nil || !strings.Contains(err.Error(), "is not on the engine") {
		t.Fatalf("ensure with a missing image: %v", err)
	}
	if ids, _ := w.b.List(context.Background()); len(ids) != 0 {
		t.Fatalf("list %v", ids)
	}
}

// TestRestartedProvisionerKillsOrphanedCommands: a command a previous
// provisioner process started (and nobody waits for) does not survive the
// new process taking the sandbox over; the sandbox's files do.
func TestRestartedProvisionerKillsOrphanedCommands(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb-orphan", "u1", "ft1", "st1")
	w.ensure(s)
	w.ok(s.ID, `echo kept > outputs/k`)
	// The old provisioner starts a long command, then "dies": its request
	// is abandoned without the cancellation cleanup a live process does.
	started := make(chan struct{})
	go func() {
		close(started)
		_, _ = w.b.Exec(context.Background(), s.ID, backend.ExecRequest{Command: `sleep 303`, Timeout: time.Hour})
	}()
	<-started
	deadline := time.Now().Add(time.Minute)
	for w.ok(s.ID, `ps -o args | grep -c '^sleep 303' || true`) != "1\n" {
		if time.Now().After(deadline) {
			t.Fatal("the long command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b2, err := docker.New(docker.Config{Host: dockertest.Engine(t), Image: dockertest.Image(t, dockertest.Engine(t)), Instance: instanceOfID(t, w, s.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Ensure(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	res, err := b2.Exec(context.Background(), s.ID, backend.ExecRequest{Command: `ps -o args | grep -c '^sleep 303' || true; cat ` + backend.OutputsDir + `/k`, Timeout: time.Minute})
	if err != nil || string(res.Output) != "0\nkept\n" {
		t.Fatalf("after takeover: %q %v", res.Output, err)
	}
	// Taking over once is enough: later Ensures leave running commands alone.
	go func() {
		_, _ = b2.Exec(context.Background(), s.ID, backend.ExecRequest{Command: `sleep 304`, Timeout: time.Hour})
	}()
	for w.ok(s.ID, `ps -o args | grep -c '^sleep 304' || true`) != "1\n" {
		if time.Now().After(deadline) {
			t.Fatal("the second long command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b2.Ensure(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := w.ok(s.ID, `ps -o args | grep -c '^sleep 304' || true`); got != "1\n" {
		t.Fatalf("a second Ensure killed a running command: %q", got)
	}
}

func instanceOfID(t *testing.T, w *world, id string) string {
	t.Helper()
	var ci struct {
		Config struct{ Labels map[string]string }
	}
	if err := getJSON(w, "/containers/"+w.b.ContainerName(id)+"/json", &ci); err != nil {
		t.Fatal(err)
	}
	return ci.Config.Labels[docker.LabelInstance]
}
