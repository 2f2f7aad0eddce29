package docker_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/docker"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DOCKER_HOST": "unix:///run/d.sock", "SANDBOX_IMAGE": "img:1", "DOCKER_SANDBOX_PREFIX": "p-",
		"DOCKER_NETWORK_PREFIX": "n-", "DOCKER_THREADS_HOST_PATH": "/srv/yuxi/saves", "SANDBOX_VOLUME_DIR": "/app/saves",
		"SANDBOX_DOCKER_NETWORK": "internal", "SANDBOX_PROVISIONER_CONTAINER": "prov", "SANDBOX_INSTANCE": "i1",
	}
	cfg, err := docker.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := docker.Config{Host: "unix:///run/d.sock", Image: "img:1", Prefix: "p-", NetworkPrefix: "n-", Network: "internal",
		ProvisionerContainer: "prov", Instance: "i1", VolumeRoot: "/app/saves", HostVolumeRoot: "/srv/yuxi/saves"}
	if cfg != want {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
	b, err := docker.NewFromEnv(func(k string) string { return env[k] }, time.Minute, backend.Limits{Pids: 9})
	if err != nil || b.Name() != "docker" {
		t.Fatalf("%v %v", b, err)
	}
	if got := b.(*docker.Backend).NetworkName("x"); got != "n-x" {
		t.Fatalf("network name %q", got)
	}
	env["DOCKER_THREADS_HOST_PATH"] = "relative"
	if _, err := docker.ConfigFromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("relative DOCKER_THREADS_HOST_PATH accepted")
	}
	env["SANDBOX_DOCKER_NETWORK"], env["DOCKER_THREADS_HOST_PATH"] = "host", ""
	if _, err := docker.NewFromEnv(func(k string) string { return env[k] }, time.Minute, backend.Limits{}); err == nil {
		t.Fatal("network host accepted")
	}
	cfg, _ = docker.ConfigFromEnv(func(string) string { return "" })
	if cfg.Image != "yuxi-sandbox:latest" || cfg.VolumeRoot != "" || filepath.IsAbs(cfg.Host) {
		t.Fatalf("defaults %+v", cfg)
	}
}
