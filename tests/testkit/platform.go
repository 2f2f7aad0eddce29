package testkit

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/local"
	"github.com/yuxi-serverless/yuxi/shared/bootstrap"
	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/shared/postgres/pgtest"
	"github.com/yuxi-serverless/yuxi/shared/redistest"
)

// Env is a process environment as a map.
type Env map[string]string

// Getenv reads it.
func (e Env) Getenv(k string) string { return e[k] }

// List returns it as KEY=VALUE pairs.
func (e Env) List() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Stack is a database, a Redis prefix and a scripted model provider for one test.
type Stack struct {
	DBURL       string
	RedisURL    string
	RedisPrefix string
	LLM         *llmtest.Server
	BlobDir     string
}

// NewStack prepares the backing services of one test.
func NewStack(t testing.TB) Stack {
	t.Helper()
	_, dbURL := pgtest.NewDatabase(t)
	_, prefix := redistest.New(t)
	return Stack{DBURL: dbURL, RedisURL: redistest.URL(), RedisPrefix: prefix, LLM: llmtest.NewServer(t), BlobDir: t.TempDir()}
}

// Env is the platform environment for the stack, with short leases so that
// recovery happens within a test's patience. extra overrides.
func (s Stack) Env(extra Env) Env {
	e := Env{
		"DATABASE_URL":                s.DBURL,
		"REDIS_URL":                   s.RedisURL,
		"YUXI_REDIS_PREFIX":           s.RedisPrefix,
		"YUXI_PROVIDER_FAKE_BASE_URL": s.LLM.URL(),
		"YUXI_DEFAULT_MODEL":          "fake:test-model",
		"YUXI_BLOB_URI":               "file://" + s.BlobDir,
		"YUXI_FILE_LEASE":             "5s",
		"YUXI_FILE_GRACE":             "3s",
		"YUXI_STEP_LEASE":             "3s",
		"YUXI_OUTBOX_CLAIM":           "2s",
		"YUXI_SWEEP_INTERVAL":         "500ms",
		"YUXI_SWEEP_STALE":            "20s",
		"YUXI_SSE_HEARTBEAT":          "15s",
		"LOG_LEVEL":                   "warn",
		"YUXI_ENCRYPTION_KEY":         "testkit-encryption-key-0123456789abcdef",
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// Local is the all-in-one platform running inside the test process.
type Local struct {
	Stack
	URL   string
	Admin *Client
	P     *local.Platform
}

// StartLocal runs the platform in-process on a free port until t ends.
func StartLocal(t testing.TB, extra Env, opts ...local.Option) *Local {
	t.Helper()
	return StartLocalOn(t, NewStack(t), extra, opts...)
}

// StartLocalOn runs another platform process on an existing stack (the same
// database, Redis and model server): two instances behind one load balancer.
func StartLocalOn(t testing.TB, st Stack, extra Env, opts ...local.Option) *Local {
	t.Helper()
	l := startLocal(t, st, extra, opts...)
	anon := &Client{T: t, Base: l.URL}
	l.Admin = anon.Login("admin", "admin-password")
	return l
}

// StartFirstRun runs the platform in-process like StartLocal but leaves it
// at its first run: no account exists yet and Admin is nil (the web UI test
// creates the superadmin through the first-run screen).
func StartFirstRun(t testing.TB, extra Env, opts ...local.Option) *Local {
	t.Helper()
	return startLocal(t, NewStack(t), extra, opts...)
}

func startLocal(t testing.TB, st Stack, extra Env, opts ...local.Option) *Local {
	t.Helper()
	env := st.Env(extra)
	cfg, err := bootstrap.Load(env.Getenv, env.List(), "0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := local.New(ctx, cfg, opts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, "127.0.0.1:0", func(a net.Addr) { ready <- a }) }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("platform did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("platform stopped: %v", err)
		}
	})
	return &Local{Stack: st, URL: "http://" + addr.String(), P: p}
}

// RepoRoot finds the module root.
func RepoRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var builds sync.Map // package path → *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build compiles a main package (e.g. "./infra/local/cmd/yuxi-server") once per test
// binary and returns the executable's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "yuxi-build-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = RepoRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Proc is a platform process started by a test.
type Proc struct {
	Cmd  *exec.Cmd
	URL  string
	Logs *SafeBuffer
	done chan error
}

// StartProc starts bin with env on a free port and waits until it answers
// GET healthPath. The process is killed when t ends.
func StartProc(t testing.TB, bin string, env Env, healthPath string) *Proc {
	t.Helper()
	e := Env{}
	for k, v := range env {
		e[k] = v
	}
	port := e["PORT"]
	if port == "" {
		port = FreePort(t)
		e["PORT"] = port
	}
	if _, ok := e["PATH"]; !ok {
		e["PATH"] = os.Getenv("PATH")
	}
	cmd := exec.Command(bin)
	cmd.Env = e.List()
	logs := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, URL: "http://127.0.0.1:" + port, Logs: logs, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited before it was ready: %v\n%s", filepath.Base(bin), err, logs.String())
		default:
		}
		resp, err := http.Get(p.URL + healthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 20s\n%s", filepath.Base(bin), logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the process to go.
func (p *Proc) Kill() {
	if p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Kill()
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
	}
}

// Exited reports whether the process has exited, waiting up to d.
func (p *Proc) Exited(d time.Duration) bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	case <-time.After(d):
		return false
	}
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// SafeBuffer is a goroutine-safe log buffer.
type SafeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SafeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SafeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
