package kube_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/backendtest"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker/dockertest"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube"
)

// dockerKubelet runs the Pods the fake API server receives as Docker
// containers on the real engine, the way a kubelet would: the Pod's
// THREAD_PVC subPath mounts become bind mounts of <volume>/<subPath>, its
// env and memory limit carry over, and its command — the exec agent — is
// started in the container, listening on a unix socket in a directory
// only the test mounts (so the container keeps only its loopback
// interface). What runs is the real exec agent, built from its package.
type dockerKubelet struct {
	d        *docker.Backend
	volume   string
	agentDir string
}

const agentBin = "/usr/local/bin/sandbox-exec-agent"

var (
	agentOnce sync.Once
	agentExe  []byte
	agentErr  error
)

// buildAgent compiles the exec agent statically, once per test process.
func buildAgent(t *testing.T) []byte {
	agentOnce.Do(func() {
		out := filepath.Join(os.TempDir(), "yuxi-exec-agent-"+strconv.Itoa(os.Getpid()))
		cmd := exec.Command("go", "build", "-o", out, "github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/cmd/sandbox-exec-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			agentErr = fmt.Errorf("build agent: %v: %s", err, b)
			return
		}
		agentExe, agentErr = os.ReadFile(out)
		_ = os.Remove(out)
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agentExe
}

func (k *dockerKubelet) sock(name string) string {
	return filepath.Join(k.agentDir, name, "agent.sock")
}

func (k *dockerKubelet) run(pod map[string]any) error {
	name := at(pod, "metadata", "name").(string)
	c := at(pod, "spec", "containers", 0)
	env := map[string]string{}
	for _, e := range at(c, "env").([]any) {
		env[at(e, "name").(string)] = at(e, "value").(string)
	}
	sockDir := filepath.Dir(k.sock(name))
	env["EXEC_AGENT_ADDR"] = "unix:/home/gem/.agent/agent.sock"
	mounts := []backend.Mount{{HostPath: sockDir, SandboxPath: "/home/gem/.agent"}}
	for _, m := range at(c, "volumeMounts").([]any) {
		sub, _ := at(m, "subPath").(string)
		if at(m, "name") != "thread-data" || sub == "" {
			continue // home and tmp: the docker backend's tmpfs
		}
		ro, _ := at(m, "readOnly").(bool)
		mounts = append(mounts, backend.Mount{HostPath: filepath.Join(k.volume, sub), SandboxPath: at(m, "mountPath").(string), ReadOnly: ro})
	}
	mem, err := strconv.ParseInt(at(c, "resources", "limits", "memory").(string), 10, 64)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.d.Ensure(ctx, backend.Spec{ID: name, Env: env, Mounts: mounts, Limits: backend.Limits{MemoryBytes: mem}}); err != nil {
		return err
	}
	res, err := k.d.Exec(ctx, name, backend.ExecRequest{Command: agentBin + " </dev/null >/dev/null 2>&1 &", Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 {
		return fmt.Errorf("start agent: %v %q", err, res.Output)
	}
	// Ready when the agent answers its health check (a readiness probe).
	hc := k.client()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+name+"/healthz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of %s never answered", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (k *dockerKubelet) stop(name string) {
	_ = k.d.Destroy(context.Background(), name)
}

// client reaches a pod's agent by its name, through its socket.
func (k *dockerKubelet) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := strings.Cut(addr, ":")
			var d net.Dialer
			return d.DialContext(ctx, "unix", k.sock(host))
		},
		DisableKeepAlives: true,
	}}
}

// TestContractOnDockerKubelet runs the backend contract against the
// kubernetes backend: objects through the fake API server, Pods run by
// the docker kubelet above, commands through the real exec agent.
// Pods have a network interface of their own in a real cluster (the
// NetworkPolicy fences it); here they keep only loopback.
func TestContractOnDockerKubelet(t *testing.T) {
	host := dockertest.Engine(t)
	image := dockertest.ImageWith(t, host, map[string][]byte{agentBin: buildAgent(t)})
	vol := t.TempDir()
	agentDir := t.TempDir()
	if err := os.Chmod(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		d, err := docker.New(docker.Config{Host: host, Image: image, Instance: "test-kubelet-" + randHex(), Prefix: "yuxi-kubelet-"})
		if err != nil {
			t.Fatal(err)
		}
		k := &dockerKubelet{d: d, volume: vol, agentDir: agentDir}
		api := newFakeAPI(t, "tok", "sandboxes")
		api.kubelet = k
		srv := httptest.NewServer(api)
		t.Cleanup(func() {
			ids, _ := d.List(context.Background())
			for _, id := range ids {
				_ = d.Destroy(context.Background(), id)
			}
			srv.Close()
		})
		b, err := kube.New(kube.Config{APIServer: srv.URL, Token: "tok", Namespace: "sandboxes", Image: image, ThreadPVC: "pvc",
			VolumeRoot: vol, AgentURL: func(name, _ string) string { return "http://" + name }, AgentClient: k.client(), ReadyTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, vol)
}

func randHex() string {
	return strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
}
