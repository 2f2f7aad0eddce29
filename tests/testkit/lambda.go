package testkit

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Lambda is a function binary running under the AWS Lambda Runtime Interface
// Emulator: the runtime API loop a provided.al2023 function runs in.
type Lambda struct {
	t    testing.TB
	URL  string // the invoke endpoint
	Logs *SafeBuffer
}

// StartLambda runs bin under aws-lambda-rie with env (plus PATH) and returns
// once the emulator listens; the function itself starts on the first
// invocation. Both are killed when t ends. Without the emulator the test is
// skipped, and fails under CI (make services installs it).
func StartLambda(t testing.TB, bin string, env Env) *Lambda {
	t.Helper()
	rie := lambdaEmulator(t)
	host := net.JoinHostPort("127.0.0.1", FreePort(t))
	e := Env{"AWS_LAMBDA_FUNCTION_TIMEOUT": "60", "PATH": os.Getenv("PATH")}
	for k, v := range env {
		e[k] = v
	}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", host,
		"--runtime-api-address", net.JoinHostPort("127.0.0.1", FreePort(t)), "--log-level", "error", bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = e.List()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the function is the emulator's child
	logs := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Lambda emulator did not listen on %s\n%s", host, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Lambda{t: t, URL: "http://" + host + "/2015-03-31/functions/function/invocations", Logs: logs}
}

// Invoke calls the function with payload and returns its response body: the
// handler's result, or a function error {errorMessage, errorType}.
func (l *Lambda) Invoke(payload []byte) []byte {
	l.t.Helper()
	resp, err := http.Post(l.URL, "application/json", bytes.NewReader(payload))
	if err != nil {
		l.t.Fatalf("invoke: %v\n%s", err, l.Logs.String())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		l.t.Fatalf("invoke: status %d: %s\n%s", resp.StatusCode, body, l.Logs.String())
	}
	return body
}

func lambdaEmulator(t testing.TB) string {
	t.Helper()
	const name = "aws-lambda-rie"
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	var dirs []string
	for _, v := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if d := strings.TrimSpace(string(out)); err == nil && d != "" {
			if v == "GOPATH" {
				d = filepath.Join(strings.Split(d, string(os.PathListSeparator))[0], "bin")
			}
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (make services installs it)", name)
	}
	t.Skipf("%s is not installed (make services installs it)", name)
	return ""
}
