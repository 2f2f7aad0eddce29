package provisioner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/memory"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/provisioner"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/volume"
)

const token = "0123456789abcdef0123456789abcdef-test"

func newProvisioner(t *testing.T, be backend.Backend) (*provisioner.Provisioner, *httptest.Server) {
	t.Helper()
	p, err := provisioner.New(provisioner.Config{Token: token, VolumeDir: t.TempDir(), SandboxOwner: volume.Owner{UID: -1, GID: -1}}, be)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return p, srv
}

func call(t *testing.T, srv *httptest.Server, method, path, tok, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out
}

func TestConfigRefusesShortTokenAndClampsIdle(t *testing.T) {
	for _, tok := range []string{"", "short", strings.Repeat("x", 31)} {
		_, err := provisioner.New(provisioner.Config{Token: tok, VolumeDir: t.TempDir()}, memory.New())
		if !errors.Is(err, provisioner.ErrConfig) {
			t.Errorf("token of %d chars: %v, want refused", len(tok), err)
		}
	}
	c := provisioner.Config{Token: token, VolumeDir: "v", ExecTimeout: 180 * time.Second, IdleTimeout: 60 * time.Second}
	if err := c.Validate(); err != nil || c.IdleTimeout != 210*time.Second {
		t.Fatalf("idle timeout 60s with exec 180s: %v %v, want 210s", c.IdleTimeout, err)
	}
	c = provisioner.Config{Token: token, VolumeDir: "v"}
	if err := c.Validate(); err != nil || c.IdleTimeout != 210*time.Second || c.ExecTimeout != 180*time.Second || c.MaxOutput != 262144 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c = provisioner.Config{Token: token, VolumeDir: "v", GlobalEnv: map[string]string{"LEAK": token}}
	if err := c.Validate(); !errors.Is(err, provisioner.ErrConfig) {
		t.Fatalf("global env holding the token: %v", err)
	}
}

func TestTokenRequiredEverywhereButHealth(t *testing.T) {
	_, srv := newProvisioner(t, memory.New())
	status, body := call(t, srv, "GET", "/health", "", "")
	if status != 200 || body["backend"] != "memory" || body["idle_timeout"] != float64(210) {
		t.Fatalf("health: %d %v", status, body)
	}
	routes := [][2]string{{"POST", "/api/sandboxes"}, {"GET", "/api/sandboxes"}, {"DELETE", "/api/sandboxes/sb-x"},
		{"POST", "/api/sandboxes/sb-x/exec"}, {"GET", "/api/files?path=outputs/a"}, {"PUT", "/api/files?path=outputs/a"},
		{"DELETE", "/api/files?path=outputs/a"}, {"POST", "/api/files/mkdir?path=outputs/a"}, {"GET", "/api/files/stat?path=outputs"},
		{"GET", "/api/files/list"}, {"GET", "/api/files/glob?pattern=*"}, {"GET", "/api/files/grep?pattern=x"}}
	for _, r := range routes {
		for _, tok := range []string{"", "short", token[:len(token)-1] + "X", token + "X"} {
			status, body := call(t, srv, r[0], r[1], tok, `{}`)
			if status != 401 || body["error"].(map[string]any)["code"] != "unauthorized" {
				t.Errorf("%s %s with token %q: %d %v", r[0], r[1], tok, status, body)
			}
		}
	}
}

func TestCreateReuseAndScopes(t *testing.T) {
	be := memory.New()
	_, srv := newProvisioner(t, be)
	status, a := call(t, srv, "POST", "/api/sandboxes", token, `{"uid":"alice","file_thread_id":"t1","env":{"MY_KEY":"v"}}`)
	if status != 200 || !strings.HasPrefix(a["sandbox_id"].(string), "sb-") || a["backend"] != "memory" {
		t.Fatalf("create: %d %v", status, a)
	}
	_, again := call(t, srv, "POST", "/api/sandboxes", token, `{"uid":"alice","file_thread_id":"t1","skills_thread_id":"t1"}`)
	_, bob := call(t, srv, "POST", "/api/sandboxes", token, `{"uid":"bob","file_thread_id":"t1"}`)
	if again["sandbox_id"] != a["sandbox_id"] || bob["sandbox_id"] == a["sandbox_id"] {
		t.Fatalf("reuse %v / other user %v / first %v", again, bob, a)
	}
	if created, _ := be.Counts(); created != 2 {
		t.Fatalf("backend created %d sandboxes, want 2", created)
	}
	for _, body := range []string{`{"uid":"../x","file_thread_id":"t"}`, `{"uid":"a","file_thread_id":"shared"}`, `{"uid":"a"}`,
		`{"uid":"a","file_thread_id":"t","env":{"BAD-NAME":"x"}}`, `{"uid":"a","file_thread_id":"t","env":{"X":"` + token + `"}}`, `{"bogus":1}`, `not json`} {
		if status, out := call(t, srv, "POST", "/api/sandboxes", token, body); status != 400 {
			t.Errorf("create %s: %d %v, want 400", body, status, out)
		}
	}
	if status, out := call(t, srv, "POST", "/api/sandboxes/sb-unknown/exec", token, `{"command":"true"}`); status != 404 || out["error"].(map[string]any)["code"] != "sandbox_not_found" {
		t.Fatalf("exec in an unknown sandbox: %d %v", status, out)
	}
}

func TestReaperRecreatesOnDemandAndSparesBusy(t *testing.T) {
	be := memory.New()
	p, _ := newProvisioner(t, be)
	ctx := context.Background()
	sb, err := p.Ensure(ctx, volume.Scope{UID: "alice", FileThread: "t1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Reap(ctx, time.Now()); n != 0 {
		t.Fatalf("reaped %d fresh sandboxes", n)
	}
	if n := p.Reap(ctx, time.Now().Add(211*time.Second)); n != 1 {
		t.Fatalf("reaped %d idle sandboxes, want 1", n)
	}
	if ids, _ := be.List(ctx); len(ids) != 0 {
		t.Fatalf("backend still has %v", ids)
	}
	// The next exec recreates it.
	res, err := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "echo hi"})
	if err != nil || res.Output != "echo hi" {
		t.Fatalf("exec after reap: %+v %v", res, err)
	}
	if created, destroyed := be.Counts(); created != 2 || destroyed != 1 {
		t.Fatalf("created %d destroyed %d, want 2 1", created, destroyed)
	}
	// A sandbox with an exec in flight is never reaped.
	started, release := make(chan struct{}), make(chan struct{})
	be.Script = func(backend.Spec, backend.ExecRequest) backend.ExecResult {
		close(started)
		<-release
		return backend.ExecResult{}
	}
	done := make(chan error)
	go func() { _, err := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "long"}); done <- err }()
	<-started
	if n := p.Reap(ctx, time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("reaped %d sandboxes with an exec in flight", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRecoverDestroysLeftovers(t *testing.T) {
	be := memory.New()
	ctx := context.Background()
	_ = be.Ensure(ctx, backend.Spec{ID: "sb-left-by-a-dead-process"})
	p, _ := newProvisioner(t, be)
	mine, _ := p.Ensure(ctx, volume.Scope{UID: "alice", FileThread: "t1"}, nil)
	n, err := p.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	if ids, _ := be.List(ctx); len(ids) != 1 || ids[0] != mine.ID {
		t.Fatalf("after recover the backend has %v, want only %s", ids, mine.ID)
	}
}

// File calls read and write the volume and never start a sandbox.
func TestFilesWithoutASandbox(t *testing.T) {
	be := memory.New()
	_, srv := newProvisioner(t, be)
	q := "uid=alice&file_thread_id=t1&path="
	if status, out := call(t, srv, "PUT", "/api/files?"+q+"outputs/r.md", token, "# report\n"); status != 200 || out["path"] != "/home/gem/user-data/outputs/r.md" {
		t.Fatalf("put: %d %v", status, out)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/files?"+q+"/home/gem/user-data/outputs/r.md", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "# report\n" || resp.Header.Get("X-File-Size") != "9" {
		t.Fatalf("get: %q %v", data, resp.Header)
	}
	if status, out := call(t, srv, "GET", "/api/files/list?uid=alice&file_thread_id=t1&path=outputs", token, ""); status != 200 || len(out["entries"].([]any)) != 1 {
		t.Fatalf("list: %d %v", status, out)
	}
	for path, want := range map[string]int{"../etc/passwd": 403, "/home/gem/skills/x": 403, "/etc/passwd": 403, "outputs/missing": 404} {
		if status, _ := call(t, srv, "PUT", "/api/files?"+q+path, token, "x"); status != want && !(path == "outputs/missing" && status == 200) {
			t.Errorf("put %s: %d, want %d", path, status, want)
		}
	}
	if status, _ := call(t, srv, "GET", "/api/files?"+q+"outputs/nope", token, ""); status != 404 {
		t.Errorf("get a missing file: %d", status)
	}
	if status, _ := call(t, srv, "GET", "/api/files?uid=bob/../alice&file_thread_id=t1&path=outputs/r.md", token, ""); status != 400 {
		t.Errorf("a scope with a slash: %d", status)
	}
	if created, _ := be.Counts(); created != 0 {
		t.Fatalf("file calls started %d sandboxes", created)
	}
}

// A keyed exec runs once: the repeat (a redelivered tool call) gets the
// first result.
func TestExecIdempotencyKey(t *testing.T) {
	be := memory.New()
	var runs atomic.Int32
	be.Script = func(_ backend.Spec, r backend.ExecRequest) backend.ExecResult {
		n := runs.Add(1)
		return backend.ExecResult{Output: []byte(fmt.Sprintf("run %d", n))}
	}
	p, _ := newProvisioner(t, be)
	ctx := context.Background()
	sb, _ := p.Ensure(ctx, volume.Scope{UID: "alice", FileThread: "t1"}, nil)
	a, _ := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "x", IdempotencyKey: "call_1"})
	b, _ := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "x", IdempotencyKey: "call_1"})
	c, _ := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "x", IdempotencyKey: "call_2"})
	d, _ := p.Exec(ctx, sb.ID, provisioner.ExecRequest{Command: "x"})
	if a.Output != "run 1" || b.Output != "run 1" || c.Output != "run 2" || d.Output != "run 3" {
		t.Fatalf("outputs %q %q %q %q", a.Output, b.Output, c.Output, d.Output)
	}
}
