// Package mcpeverything starts the reference MCP server
// @modelcontextprotocol/server-everything (pinned in this folder's
// package.json and package-lock.json, installed by `make mcp-test-deps`,
// which `make test` runs) over streamable HTTP on a free loopback port.
// A missing node or package fails the test: it is never skipped.
//
// Imported by: tests. May import: the standard library and testing.
package mcpeverything

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running server-everything process.
type Server struct {
	// URL is the streamable HTTP endpoint (http://127.0.0.1:<port>/mcp).
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Dir is the folder holding package.json and node_modules.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Start launches the server and returns once it listens.
func Start(ctx context.Context) (*Server, error) {
	entry := filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("server-everything is not installed (run make mcp-test-deps): %w", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed (run make mcp-test-deps): %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if !signalled {
				log.WriteString(line + "\n")
			}
			if !signalled && strings.Contains(line, "listening on port") {
				signalled = true
				close(ready)
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(s.exited) }()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("server-everything exited before listening: %s", log.String())
	case <-ctx.Done():
		s.Kill()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		s.Kill()
		return nil, errors.New("server-everything did not listen within 60s")
	}
}

// StartT starts a server for a test and kills it at cleanup; failures fail
// the test.
func StartT(t testing.TB) *Server {
	t.Helper()
	s, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Kill SIGKILLs the server's process group and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-s.exited
}
