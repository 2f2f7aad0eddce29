package docker

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// ConfigFromEnv reads the backend's settings through getenv (main's
// lookup; nothing below main reads the environment), with the original's
// variable names where it had them:
//
//	DOCKER_HOST                   engine socket (default unix:///var/run/docker.sock)
//	SANDBOX_IMAGE                 sandbox image (default yuxi-sandbox:latest)
//	DOCKER_SANDBOX_PREFIX         container name prefix (default yuxi-sandbox-)
//	DOCKER_NETWORK_PREFIX         network name prefix in internal mode (default: the container prefix)
//	DOCKER_THREADS_HOST_PATH      the volume's path on the Docker host, when the provisioner
//	                              sees it elsewhere (at SANDBOX_VOLUME_DIR, default .yuxi/sandbox)
//	SANDBOX_DOCKER_NETWORK        none (default: loopback only) or internal
//	SANDBOX_PROVISIONER_CONTAINER the provisioner's container, joined to internal networks
//	SANDBOX_INSTANCE              label value separating provisioners sharing an engine (default yuxi)
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		Host:                 getenv("DOCKER_HOST"),
		Image:                getenv("SANDBOX_IMAGE"),
		Prefix:               getenv("DOCKER_SANDBOX_PREFIX"),
		NetworkPrefix:        getenv("DOCKER_NETWORK_PREFIX"),
		Network:              getenv("SANDBOX_DOCKER_NETWORK"),
		ProvisionerContainer: getenv("SANDBOX_PROVISIONER_CONTAINER"),
		Instance:             getenv("SANDBOX_INSTANCE"),
	}
	if cfg.Image == "" {
		cfg.Image = "yuxi-sandbox:latest"
	}
	if hp := getenv("DOCKER_THREADS_HOST_PATH"); hp != "" {
		vol := getenv("SANDBOX_VOLUME_DIR")
		if vol == "" {
			vol = ".yuxi/sandbox"
		}
		abs, err := filepath.Abs(vol)
		if err != nil {
			return cfg, fmt.Errorf("SANDBOX_VOLUME_DIR: %w", err)
		}
		if !filepath.IsAbs(hp) {
			return cfg, fmt.Errorf("DOCKER_THREADS_HOST_PATH=%q is not absolute", hp)
		}
		cfg.VolumeRoot, cfg.HostVolumeRoot = abs, hp
	}
	return cfg, nil
}

// NewFromEnv is ConfigFromEnv then New, with the provisioner's exec
// timeout and default limits: the shape of the provisioner's backend table.
func NewFromEnv(getenv func(string) string, execTimeout time.Duration, limits backend.Limits) (backend.Backend, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.ExecTimeout, cfg.Defaults = execTimeout, limits
	return New(cfg)
}
