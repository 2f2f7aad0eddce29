package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yuxi-serverless/yuxi/tests/bench/benchkit"
)

// functionNames are the function binaries the bench builds and starts.
var functionNames = []string{"intake", "dispatcher", "agent-step", "tool-invoke", "doc-parse", "kb-index"}

// localRunner is the all-in-one local runner (every function in one
// process, `make run`), which figure 7 ingests through.
const localRunner = "yuxi-server"

// buildBinaries builds every function (go build -o dir ./functions/<name>…),
// the local runner and the hello-world floor of figure 4, whose source is
// written to a temporary module at bench time.
func buildBinaries(ctx context.Context, root, dir string) (map[string]string, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range functionNames {
		args = append(args, "./functions/"+n)
	}
	args = append(args, "./infra/local/cmd/"+localRunner)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	bins := map[string]string{localRunner: filepath.Join(dir, localRunner)}
	for _, n := range functionNames {
		bins[n] = filepath.Join(dir, n)
	}

	src := filepath.Join(dir, "hello-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	files := map[string]string{"go.mod": "module benchhello\n\ngo 1.26\n", "main.go": helloSource}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	bins["hello"] = filepath.Join(dir, "hello")
	cmd = exec.CommandContext(ctx, "go", "build", "-o", bins["hello"], ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build hello-world: %v\n%s", err, out)
	}
	return bins, nil
}

// helloSource is the cold-start floor: a trivial net/http server that binds
// PORT and prints its ready line the way the function mains do.
const helloSource = `package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", ":"+os.Getenv("PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))
	fmt.Fprintf(os.Stderr, "hello: ready on %s\n", ln.Addr())
	select {}
}
`

// proc is a started function process.
type proc struct {
	name string
	cmd  *exec.Cmd
	// Addr is the address of the ready line (see readyAddr).
	Addr string
	// Ready is the time from just before exec to reading the ready line.
	Ready time.Duration
	// RSS is VmRSS read from /proc the moment the ready line was read.
	RSS      int64
	logs     *tail
	readDone chan struct{}
}

// startProc execs bin with env and waits for its ready line on stderr.
// onLine, when not nil, sees every stderr line before the ready line.
func startProc(bin string, env map[string]string, timeout time.Duration, onLine func(string)) (*proc, error) {
	name := filepath.Base(bin)
	cmd := exec.Command(bin)
	full := map[string]string{"PATH": os.Getenv("PATH")}
	for k, v := range env {
		full[k] = v
	}
	cmd.Env = benchkit.EnvList(full)
	logs := &tail{}
	cmd.Stdout = logs
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, logs: logs, readDone: make(chan struct{})}
	type ready struct {
		addr string
		at   time.Time
		rss  int64
	}
	readyCh := make(chan ready, 1)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		defer close(p.readDone)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			if !seen {
				if onLine != nil {
					onLine(line)
				}
				if addr, ok := readyAddr(line); ok {
					at := time.Now()
					rss, _ := readRSS(cmd.Process.Pid)
					seen = true
					readyCh <- ready{addr: addr, at: at, rss: rss}
					continue
				}
			}
			logs.Write([]byte(line + "\n"))
		}
	}()
	select {
	case r := <-readyCh:
		p.Addr, p.Ready, p.RSS = r.addr, r.at.Sub(t0), r.rss
		return p, nil
	case <-p.readDone:
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s exited before it was ready: %s\n%s", name, cmd.ProcessState, logs)
	case <-time.After(timeout):
		p.kill()
		return nil, fmt.Errorf("%s not ready after %s\n%s", name, timeout, logs)
	}
}

// readyAddr finds the listening address in a ready line: "<function>:
// ready on <addr>" (the functions) or "yuxi: ready, web UI and API on
// http://<addr> (…)" (the local runner, infra/local/cmd/yuxi-server).
func readyAddr(line string) (string, bool) {
	if _, addr, ok := strings.Cut(line, ": ready on "); ok {
		return strings.TrimSpace(addr), true
	}
	if _, rest, ok := strings.Cut(line, ": ready, web UI and API on http://"); ok {
		addr, _, _ := strings.Cut(rest, " ")
		return addr, true
	}
	return "", false
}

// Port is the port of the ready line's address.
func (p *proc) Port() (int, error) {
	i := strings.LastIndex(p.Addr, ":")
	if i < 0 {
		return 0, fmt.Errorf("%s: no port in ready address %q", p.name, p.Addr)
	}
	return strconv.Atoi(p.Addr[i+1:])
}

// kill ends the process with SIGKILL and reaps it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.readDone
	_ = p.cmd.Wait()
}

// stop asks the process to end (SIGTERM), then kills it after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.readDone:
		_ = p.cmd.Wait()
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// readRSS returns VmRSS of pid in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// tail keeps the last 8 KiB written to it (a process's logs, for errors).
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = append([]byte(nil), t.b[len(t.b)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
