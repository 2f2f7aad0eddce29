//go:build unix

package faas_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Helpers for the tests that run a function as a separate process under a
// platform's own runtime (aws-lambda-rie, functions-framework-go).

// needTool returns the path of a tool the test needs: it skips the test when
// the tool is missing locally and fails it in CI.
func needTool(t *testing.T, name string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range extraDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI must have it)", name)
	}
	t.Skipf("%s is not installed", name)
	return ""
}

// goEnv returns `go env name`.
func goEnv(t *testing.T, goTool, name string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), goTool, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// buildTestFunction builds the main package in testdata/<dir> and returns the
// binary's path.
func buildTestFunction(t *testing.T, goTool, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), dir)
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "./testdata/"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/%s: %v\n%s", dir, err, out)
	}
	return bin
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// process is a started child process (and its own process group) whose stdout
// lines can be awaited.
type process struct {
	t       *testing.T
	cmd     *exec.Cmd
	scanned chan struct{} // closed when stdout is fully read
	once    sync.Once
	waitErr error

	mu      sync.Mutex
	log     strings.Builder // stdout and stderr, for failure reports
	stdout  []string        // every stdout line so far
	newLine chan struct{}   // closed and replaced on every stdout line
}

// start runs cmd in its own process group, killed when the test ends.
func start(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{t: t, cmd: cmd, newLine: make(chan struct{}), scanned: make(chan struct{})}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &lockedWriter{p: p}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	go func() {
		defer close(p.scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.stdout = append(p.stdout, sc.Text())
			close(p.newLine)
			p.newLine = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		// Kill exactly the group this test started (the emulator also starts
		// the function as its child).
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = p.wait()
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(cmd.Path), p.output())
		}
	})
	return p
}

// wait waits for the process to exit, after its stdout has been read.
func (p *process) wait() error {
	p.once.Do(func() {
		<-p.scanned
		p.waitErr = p.cmd.Wait()
	})
	return p.waitErr
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// waitLine waits until the process has printed a stdout line starting with
// prefix (at any point since it started) and returns it.
func (p *process) waitLine(prefix string) string {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		for _, line := range p.stdout {
			if strings.HasPrefix(line, prefix) {
				p.mu.Unlock()
				return line
			}
		}
		next := p.newLine
		p.mu.Unlock()
		select {
		case <-next:
		case <-deadline:
			p.t.Fatalf("no line %q within 30s", prefix)
		}
	}
}

type lockedWriter struct{ p *process }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

// waitListening waits until addr accepts TCP connections. Used only for
// servers that announce readiness nowhere (the Lambda emulator).
func waitListening(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s is not listening: %v", addr, err)
		case <-tick.C:
		}
	}
}

// childEnv is a minimal environment for a child process: nothing of the
// test's own YUXI_/AWS_/FUNCTION_ settings leaks in.
func childEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	return append(env, extra...)
}
