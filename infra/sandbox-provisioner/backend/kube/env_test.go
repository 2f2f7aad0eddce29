package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend"
	"github.com/yuxi-serverless/yuxi/infra/sandbox-provisioner/backend/kube"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBE_API_SERVER": "https://api.example:6443", "KUBE_TOKEN_FILE": tok, "K8S_NAMESPACE": "yuxi-know",
		"THREAD_PVC": "yuxi-thread", "SANDBOX_IMAGE": "img:2", "SANDBOX_VOLUME_DIR": "/app/saves",
		"SANDBOX_PROVISIONER_POD_LABELS": "app=prov, tier=sandbox", "SANDBOX_PROVISIONER_NAMESPACE": "yuxi", "SANDBOX_INSTANCE": "i",
	}
	get := func(k string) string { return env[k] }
	cfg, err := kube.ConfigFromEnv(get)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.APIServer != "https://api.example:6443" || cfg.TokenFile != tok || cfg.Namespace != "yuxi-know" || cfg.ThreadPVC != "yuxi-thread" ||
		cfg.Image != "img:2" || cfg.VolumeRoot != "/app/saves" || cfg.ProvisionerPods["tier"] != "sandbox" || cfg.ProvisionerPods["app"] != "prov" ||
		cfg.ProvisionerNamespace != "yuxi" || cfg.Instance != "i" {
		t.Fatalf("%+v", cfg)
	}
	b, err := kube.NewFromEnv(get, time.Minute, backend.Limits{})
	if err != nil || b.Name() != "kubernetes" {
		t.Fatalf("%v %v", b, err)
	}
	for k, want := range map[string]string{"THREAD_PVC": "THREAD_PVC is required", "KUBE_API_SERVER": "KUBERNETES_SERVICE_HOST"} {
		saved := env[k]
		env[k] = ""
		if _, err := kube.ConfigFromEnv(get); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("without %s: %v", k, err)
		}
		env[k] = saved
	}
	env["KUBE_API_SERVER"], env["KUBECONFIG_PATH"] = "", "/root/.kube/config"
	if _, err := kube.ConfigFromEnv(get); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("kubeconfig: %v", err)
	}
}
