package kube

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
)

// ConfigFromEnv reads the backend's settings through getenv (main's
// lookup), with the original's variable names where it had them:
//
//	K8S_NAMESPACE                  namespace for sandboxes (default: the provisioner's own)
//	THREAD_PVC                     the claim holding threads/ (required)
//	SANDBOX_IMAGE                  sandbox image running the exec agent (default yuxi-sandbox:latest)
//	SANDBOX_VOLUME_DIR             where the provisioner mounts THREAD_PVC (default .yuxi/sandbox)
//	KUBE_API_SERVER, KUBE_TOKEN_FILE, KUBE_CA_FILE
//	                               an API server outside the cluster (default: in-cluster
//	                               service account); KUBECONFIG_PATH is not read
//	SANDBOX_PROVISIONER_POD_LABELS k=v,… selecting the provisioner's pods (the NetworkPolicy's
//	                               only admitted peers; default app.kubernetes.io/name=sandbox-provisioner)
//	SANDBOX_PROVISIONER_NAMESPACE  the provisioner's namespace (default K8S_NAMESPACE)
//	SANDBOX_INSTANCE               label value separating provisioners (default yuxi)
//
// SKILLS_PVC and NODE_HOST, which the original read, are not used: skills
// are a THREAD_PVC subPath (as the original's Pods actually mount them)
// and Services are ClusterIP.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	var err error
	if api := getenv("KUBE_API_SERVER"); api != "" {
		cfg.APIServer, cfg.TokenFile = api, getenv("KUBE_TOKEN_FILE")
		if ca := getenv("KUBE_CA_FILE"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return cfg, fmt.Errorf("KUBE_CA_FILE: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cfg, errors.New("KUBE_CA_FILE holds no certificate")
			}
			cfg.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		}
	} else if getenv("KUBECONFIG_PATH") != "" {
		return cfg, errors.New("KUBECONFIG_PATH is not supported: run the provisioner in the cluster, or set KUBE_API_SERVER and KUBE_TOKEN_FILE")
	} else if cfg, err = InClusterConfig(getenv); err != nil {
		return cfg, err
	}
	if ns := getenv("K8S_NAMESPACE"); ns != "" {
		cfg.Namespace = ns
	}
	cfg.ThreadPVC = getenv("THREAD_PVC")
	if cfg.ThreadPVC == "" {
		return cfg, errors.New("THREAD_PVC is required for the kubernetes backend")
	}
	cfg.Image = getenv("SANDBOX_IMAGE")
	if cfg.Image == "" {
		cfg.Image = "yuxi-sandbox:latest"
	}
	vol := getenv("SANDBOX_VOLUME_DIR")
	if vol == "" {
		vol = ".yuxi/sandbox"
	}
	if cfg.VolumeRoot, err = filepath.Abs(vol); err != nil {
		return cfg, fmt.Errorf("SANDBOX_VOLUME_DIR: %w", err)
	}
	if sel := getenv("SANDBOX_PROVISIONER_POD_LABELS"); sel != "" {
		cfg.ProvisionerPods = map[string]string{}
		for _, kv := range strings.Split(sel, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return cfg, fmt.Errorf("SANDBOX_PROVISIONER_POD_LABELS=%q: want k=v,…", sel)
			}
			cfg.ProvisionerPods[k] = v
		}
	}
	cfg.ProvisionerNamespace = getenv("SANDBOX_PROVISIONER_NAMESPACE")
	cfg.Instance = getenv("SANDBOX_INSTANCE")
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
