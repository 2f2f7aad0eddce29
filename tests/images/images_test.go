// Package images checks `make images` (infra/images/build.sh) on a real
// Docker Engine: the images build with `docker import` (no base image, no
// registry), carry the entrypoint, user and port the cloud configurations
// expect, and serve — intake's image answers the API with the platform's
// PostgreSQL and Redis, the provisioner's image answers /health and refuses
// to start with a short token.
//
// May import: tests/testkit, infra/sandbox-provisioner/backend/docker/dockertest.
package images

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker/dockertest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

func TestImagesBuildAndServe(t *testing.T) {
	host := dockertest.Engine(t)
	cli, err := exec.LookPath("docker")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the docker CLI is missing (make docker-engine installs docker.io)")
		}
		t.Skip("the docker CLI is missing")
	}
	root := testkit.RepoRoot(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	repo := "yuxi-images-test-" + hex.EncodeToString(b)
	dockerEnv := append(os.Environ(), "DOCKER_HOST="+host)
	docker := func(args ...string) (string, error) {
		cmd := exec.Command(cli, args...)
		cmd.Env = dockerEnv
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	build := exec.Command("bash", "infra/images/build.sh", "intake", "sandbox-provisioner")
	build.Dir = root
	build.Env = append(dockerEnv, "IMAGE_REPO="+repo, "IMAGE_ARCH="+runtime.GOARCH)
	var stderr bytes.Buffer
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { _, _ = docker("rmi", "-f", repo+":intake", repo+":sandbox-provisioner") })
	if got := strings.Fields(string(out)); strings.Join(got, " ") != repo+":intake "+repo+":sandbox-provisioner" {
		t.Fatalf("build.sh printed %q", out)
	}

	// The image configuration the cloud configurations rely on.
	for name, want := range map[string]struct{ user, port string }{"intake": {"65532:65532", "8080"}, "sandbox-provisioner": {"0:0", "8002"}} {
		js, err := docker("image", "inspect", repo+":"+name)
		if err != nil {
			t.Fatalf("inspect %s: %v %s", name, err, js)
		}
		var info []struct {
			Architecture string
			Config       struct {
				User       string
				Entrypoint []string
				Env        []string
				WorkingDir string
			}
		}
		if err := json.Unmarshal([]byte(js), &info); err != nil || len(info) != 1 {
			t.Fatalf("inspect %s: %v %s", name, err, js)
		}
		c := info[0].Config
		if c.User != want.user || strings.Join(c.Entrypoint, " ") != "/bootstrap" || !contains(c.Env, "PORT="+want.port) ||
			info[0].Architecture != runtime.GOARCH {
			t.Errorf("%s image config: %+v (arch %s)", name, c, info[0].Architecture)
		}
	}

	// intake's image serves the API as its non-root user with the platform's data stores.
	st := testkit.NewStack(t)
	port := testkit.FreePort(t)
	env := st.Env(testkit.Env{"PORT": port, "YUXI_BLOB_URI": "file:///tmp/objects",
		"YUXI_JWT_SECRET": "images-test-jwt-secret-0123456789abcdef", "YUXI_API_KEY_SECRET": "images-test-api-key-secret-0123456789ab"})
	name := repo + "-intake"
	args := []string{"run", "-d", "--name", name, "--network", "host"}
	for _, kv := range env.List() {
		args = append(args, "-e", kv)
	}
	if id, err := docker(append(args, repo+":intake")...); err != nil {
		t.Fatalf("run intake: %v %s", err, id)
	}
	t.Cleanup(func() { _, _ = docker("rm", "-f", name) })
	body := waitFor(t, "http://127.0.0.1:"+port+"/api/system/health", func() string { l, _ := docker("logs", name); return l })
	if !strings.Contains(body, "ok") {
		t.Fatalf("intake health: %s", body)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/api/auth/check-first-run")
	if err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(first), "true") {
		t.Fatalf("check-first-run through the image: %d %s", resp.StatusCode, first)
	}

	// The provisioner's image: refused with a short token, serving with a good one.
	short := repo + "-prov-short"
	if out, err := docker("run", "--name", short, "--network", "host", "-e", "PROVISIONER_BACKEND=memory",
		"-e", "SANDBOX_PROVISIONER_TOKEN=short", "-e", "PORT="+testkit.FreePort(t), repo+":sandbox-provisioner"); err == nil ||
		!strings.Contains(strings.ToLower(out), "token") {
		t.Errorf("provisioner with a short token: err %v, output %q", err, out)
	}
	_, _ = docker("rm", "-f", short)
	pport := testkit.FreePort(t)
	prov := repo + "-prov"
	if id, err := docker("run", "-d", "--name", prov, "--network", "host", "-e", "PROVISIONER_BACKEND=memory",
		"-e", "SANDBOX_PROVISIONER_TOKEN=images-test-provisioner-token-0123456789", "-e", "SANDBOX_VOLUME_DIR=/tmp/volume",
		"-e", "PORT="+pport, repo+":sandbox-provisioner"); err != nil {
		t.Fatalf("run provisioner: %v %s", err, id)
	}
	t.Cleanup(func() { _, _ = docker("rm", "-f", prov) })
	health := waitFor(t, "http://127.0.0.1:"+pport+"/health", func() string { l, _ := docker("logs", prov); return l })
	var h struct {
		Backend string `json:"backend"`
	}
	if err := json.Unmarshal([]byte(health), &h); err != nil || h.Backend != "memory" {
		t.Fatalf("provisioner health: %s", health)
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// waitFor polls url until it answers 200 and returns the body.
func waitFor(t *testing.T, url string, logs func() string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within a minute (last error %v); container logs:\n%s", url, err, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
