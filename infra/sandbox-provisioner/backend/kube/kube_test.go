package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube/execagent"
)

type world struct {
	api    *fakeAPI
	b      *kube.Backend
	vol    string
	agent  *httptest.Server
	apiURL string

	mu        sync.Mutex
	agentHits []string // pod names the agent was called for
}

func newWorld(t *testing.T, mod func(*kube.Config)) *world {
	t.Helper()
	w := &world{api: newFakeAPI(t, "secret-token", "sandboxes"), vol: t.TempDir()}
	w.api.readyAfter = 2
	srv := httptest.NewServer(w.api)
	t.Cleanup(srv.Close)
	w.apiURL = srv.URL
	agentDir := t.TempDir()
	ag := execagent.New(execagent.Config{Workdir: agentDir})
	w.agent = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		pod, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		w.mu.Lock()
		w.agentHits = append(w.agentHits, pod)
		w.mu.Unlock()
		r.URL.Path = "/" + rest
		ag.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.agent.Close)
	cfg := kube.Config{
		APIServer:  srv.URL,
		Token:      "secret-token",
		Namespace:  "sandboxes",
		Image:      "registry.example/yuxi-sandbox:1",
		ThreadPVC:  "yuxi-thread",
		VolumeRoot: w.vol,
		AgentURL:   func(name, ns string) string { return w.agent.URL + "/" + name },
	}
	if mod != nil {
		mod(&cfg)
	}
	b, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.b = b
	return w
}

func (w *world) spec(id, uid, ft, st string) backend.Spec {
	td := filepath.Join(w.vol, "threads")
	return backend.Spec{ID: id, UID: uid, FileThread: ft, SkillsThread: st,
		Env: map[string]string{"AGENT_VAR": "v-" + uid},
		Mounts: []backend.Mount{
			{HostPath: filepath.Join(td, "shared", uid, "workspace"), SandboxPath: backend.WorkspaceDir},
			{HostPath: filepath.Join(td, ft, "user-data", "uploads"), SandboxPath: backend.UploadsDir},
			{HostPath: filepath.Join(td, ft, "user-data", "outputs"), SandboxPath: backend.OutputsDir},
			{HostPath: filepath.Join(td, st, "skills"), SandboxPath: backend.SkillsDir, ReadOnly: true},
		}}
}

func TestEnsureMakesAFencedNonRootPod(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("thread-1:skills-1", "alice", "ft1", "st1")
	ctx := context.Background()
	if err := w.b.Ensure(ctx, s); err != nil {
		t.Fatal(err)
	}
	name := w.b.ObjectName(s.ID)
	if len(name) > 63 || strings.ContainsAny(name, ":_") {
		t.Fatalf("name %q is not a DNS label", name)
	}
	// The fence exists before the Pod can run.
	if h := w.api.history(); fmt.Sprint(h) != "[POST networkpolicies POST services POST pods]" {
		t.Fatalf("order %v", h)
	}
	pod := w.api.get("pods", name)
	if pod == nil {
		t.Fatal("no pod")
	}
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"spec", "automountServiceAccountToken"}, false},
		{[]any{"spec", "enableServiceLinks"}, false},
		{[]any{"spec", "hostNetwork"}, false},
		{[]any{"spec", "securityContext", "runAsNonRoot"}, true},
		{[]any{"spec", "securityContext", "runAsUser"}, 1000.0},
		{[]any{"spec", "securityContext", "seccompProfile", "type"}, "RuntimeDefault"},
		{[]any{"spec", "containers", 0, "image"}, "registry.example/yuxi-sandbox:1"},
		{[]any{"spec", "containers", 0, "securityContext", "allowPrivilegeEscalation"}, false},
		{[]any{"spec", "containers", 0, "securityContext", "readOnlyRootFilesystem"}, true},
		{[]any{"spec", "containers", 0, "securityContext", "runAsNonRoot"}, true},
		{[]any{"spec", "containers", 0, "securityContext", "capabilities", "drop", 0}, "ALL"},
		{[]any{"spec", "containers", 0, "resources", "limits", "memory"}, "536870912"},
		{[]any{"spec", "volumes", 0, "persistentVolumeClaim", "claimName"}, "yuxi-thread"},
		{[]any{"spec", "volumes", 1, "emptyDir", "medium"}, "Memory"},
		{[]any{"metadata", "labels", kube.LabelInstance}, "yuxi"},
		{[]any{"metadata", "annotations", kube.AnnotationID}, s.ID},
	}
	for _, c := range checks {
		if got := at(pod, c.path...); got != c.want {
			t.Errorf("pod %v = %v, want %v", c.path, got, c.want)
		}
	}
	// THREAD_PVC subPaths as the original, skills read-only; nothing else mounted.
	mounts := map[string]string{}
	for _, m := range at(pod, "spec", "containers", 0, "volumeMounts").([]any) {
		mm := m.(map[string]any)
		mounts[mm["mountPath"].(string)] = fmt.Sprintf("%v:%v:%v", mm["name"], mm["subPath"], mm["readOnly"])
	}
	want := map[string]string{
		"/home/gem":                     "home:<nil>:<nil>",
		"/tmp":                          "tmp:<nil>:<nil>",
		"/home/gem/user-data/workspace": "thread-data:threads/shared/alice/workspace:false",
		"/home/gem/user-data/uploads":   "thread-data:threads/ft1/user-data/uploads:false",
		"/home/gem/user-data/outputs":   "thread-data:threads/ft1/user-data/outputs:false",
		"/home/gem/skills":              "thread-data:threads/st1/skills:true",
	}
	if fmt.Sprint(mounts) != fmt.Sprint(want) {
		t.Errorf("mounts\n got %v\nwant %v", mounts, want)
	}
	for _, v := range at(pod, "spec", "volumes").([]any) {
		if _, hp := v.(map[string]any)["hostPath"]; hp {
			t.Errorf("hostPath volume: %v", v)
		}
	}
	env := fmt.Sprint(at(pod, "spec", "containers", 0, "env"))
	if !strings.Contains(env, "AGENT_VAR value:v-alice") || strings.Contains(env, "TOKEN") {
		t.Errorf("env %s", env)
	}
	// The writable dirs exist on the volume, owned by the sandbox uid.
	fi, err := os.Stat(filepath.Join(w.vol, "threads/ft1/user-data/outputs"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 && os.Geteuid() == 0 {
		t.Errorf("outputs dir: %v %v", fi, err)
	}

	np := w.api.get("networkpolicies", name)
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"spec", "podSelector", "matchLabels", kube.LabelSandbox}, name},
		{[]any{"spec", "policyTypes", 0}, "Ingress"},
		{[]any{"spec", "policyTypes", 1}, "Egress"},
		{[]any{"spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "app.kubernetes.io/name"}, "sandbox-provisioner"},
		{[]any{"spec", "ingress", 0, "ports", 0, "port"}, 8080.0},
	} {
		if got := at(np, c.path...); got != c.want {
			t.Errorf("policy %v = %v, want %v", c.path, got, c.want)
		}
	}
	if eg, ok := at(np, "spec", "egress").([]any); !ok || len(eg) != 0 {
		t.Errorf("egress must be an empty list (deny all): %v", at(np, "spec", "egress"))
	}
	svc := w.api.get("services", name)
	if at(svc, "spec", "type") != "ClusterIP" || at(svc, "spec", "selector", kube.LabelSandbox) != name || at(svc, "spec", "ports", 0, "port") != 8080.0 {
		t.Errorf("service %v", svc)
	}

	// Reuse: nothing is created again.
	if err := w.b.Ensure(ctx, s); err != nil {
		t.Fatal(err)
	}
	if h := w.api.history(); len(h) != 3 {
		t.Fatalf("second ensure made objects: %v", h)
	}
	// A new per-user env replaces the Pod (only the Pod).
	s.Env["AGENT_VAR"] = "changed"
	if err := w.b.Ensure(ctx, s); err != nil {
		t.Fatal(err)
	}
	if h := w.api.history(); fmt.Sprint(h[3:]) != "[DELETE pods POST pods]" {
		t.Fatalf("respec: %v", h)
	}
	if env := fmt.Sprint(at(w.api.get("pods", name), "spec", "containers", 0, "env")); !strings.Contains(env, "value:changed") {
		t.Fatalf("env after respec %s", env)
	}
}

func TestListDestroyAndLeftovers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := w.b.Ensure(ctx, w.spec(id, "u", "ft-"+id, "st")); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := w.b.List(ctx)
	if err != nil || fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("list %v %v", ids, err)
	}
	// Another provisioner on the same cluster sees none of them.
	other, err := kube.New(kube.Config{APIServer: w.apiURL, Token: "secret-token", Namespace: "sandboxes", Image: "i", ThreadPVC: "p", VolumeRoot: w.vol, Instance: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := other.List(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("other instance lists %v %v", ids, err)
	}
	if err := w.b.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	name := w.b.ObjectName("a")
	for _, r := range []string{"pods", "services", "networkpolicies"} {
		if w.api.get(r, name) != nil {
			t.Errorf("%s %s left", r, name)
		}
	}
	if err := w.b.Destroy(ctx, "a"); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	// A half-destroyed sandbox (only its Service left) is still listed.
	if err := w.api.deleteRaw("pods", w.b.ObjectName("b")); err != nil {
		t.Fatal(err)
	}
	if ids, _ := w.b.List(ctx); fmt.Sprint(ids) != "[b]" {
		t.Fatalf("list %v", ids)
	}
}

func (f *fakeAPI) deleteRaw(resource, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.objs {
		if strings.HasSuffix(key, "/"+resource+"/"+name) {
			delete(f.objs, key)
			return nil
		}
	}
	return errors.New("missing")
}

func TestExecThroughTheAgent(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	s := w.spec("sb", "u", "ft", "st")
	ctx := context.Background()
	if err := w.b.Ensure(ctx, s); err != nil {
		t.Fatal(err)
	}
	res, err := w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `echo out; echo err >&2; echo "$X"; exit 4`, Env: map[string]string{"X": "x"}})
	if err != nil || res.ExitCode != 4 || string(res.Output) != "out\nerr\nx\n" {
		t.Fatalf("%+v %q %v", res, res.Output, err)
	}
	res, err = w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `head -c 400000 /dev/zero`})
	if err != nil || len(res.Output) != backend.DefaultOutput || !res.Truncated {
		t.Fatalf("cap: %d %v %v", len(res.Output), res.Truncated, err)
	}
	res, err = w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: `sleep 300`, Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	w.mu.Lock()
	hits := fmt.Sprint(w.agentHits)
	w.mu.Unlock()
	if want := w.b.ObjectName(s.ID); hits != fmt.Sprint([]string{want, want, want}) {
		t.Fatalf("agent called for %s", hits)
	}
	// Gone: the agent cannot be reached and the Pod is not there.
	if err := w.b.Destroy(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	w.agent.Close()
	if _, err := w.b.Exec(ctx, s.ID, backend.ExecRequest{Command: "true"}); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("exec in a destroyed sandbox: %v", err)
	}
}

func TestEnsureFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A Pod that never becomes Ready fails Ensure at the ready timeout.
	w := newWorld(t, func(c *kube.Config) { c.ReadyTimeout = 300 * time.Millisecond })
	w.api.readyAfter = -1
	if err := w.b.Ensure(ctx, w.spec("slow", "u", "ft", "st")); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("never ready: %v", err)
	}
	// A wrong token is refused by the API server.
	w2 := newWorld(t, func(c *kube.Config) { c.Token = "wrong" })
	if err := w2.b.Ensure(ctx, w2.spec("x", "u", "ft", "st")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	// The token file is read (and re-read) when set.
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte("secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w3 := newWorld(t, func(c *kube.Config) { c.Token = ""; c.TokenFile = tf })
	if _, err := w3.b.List(ctx); err != nil {
		t.Fatalf("token file: %v", err)
	}
	// Mount sources off the volume are refused before anything is made.
	s := w.spec("escape", "u", "ft", "st")
	s.Mounts[0].HostPath = "/etc"
	if err := w.b.Ensure(ctx, s); err == nil || !strings.Contains(err.Error(), "not under the volume") {
		t.Fatalf("mount off the volume: %v", err)
	}
	s = w.spec("escape2", "u", "ft", "st")
	s.Mounts[1].SandboxPath = "/etc/passwd"
	if err := w.b.Ensure(ctx, s); err == nil {
		t.Fatal("sandbox path outside /home/gem accepted")
	}
	if _, err := kube.New(kube.Config{APIServer: "x", Namespace: "n", Image: "i", ThreadPVC: "p", VolumeRoot: "/v", UID: -1, GID: 5}); err == nil {
		t.Fatal("negative uid accepted")
	}
}
