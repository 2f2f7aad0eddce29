package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// Model providers managed through the API: an admin saves one (its key is
// never answered), lists its remote models and checks a model on a local
// OpenAI-compatible server allowed by YUXI_OUTBOUND_ALLOW; a URL the SSRF
// policy denies is refused; a plain user reads only the grouped model list.
func TestModelProvidersThroughTheAPI(t *testing.T) {
	t.Parallel()
	vllm := llmtest.NewServer(t)
	u, _ := url.Parse(vllm.URL())
	p := testkit.StartLocal(t, testkit.Env{"YUXI_OUTBOUND_ALLOW": u.Host})
	admin := p.Admin
	user := admin.NewUser("provuser")

	const key = "sk-vllm-never-shown"
	body := map[string]any{"provider_id": "vllm", "display_name": "vLLM", "base_url": vllm.URL(), "api_key": key,
		"capabilities": []string{"chat"}, "enabled_models": []map[string]any{{"id": "fake-model", "type": "chat"}}}
	for _, path := range []string{"/api/system/model-providers", "/api/system/model-providers/fake", "/api/system/model-providers/models/status?spec=fake:x"} {
		if r := user.Do("GET", path, nil); r.Status != http.StatusForbidden {
			t.Fatalf("user GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := user.Do("POST", "/api/system/model-providers", body); r.Status != http.StatusForbidden {
		t.Fatalf("user create: %d %s", r.Status, r.Body)
	}
	if r := user.As("").Do("GET", "/api/system/model-providers/models/v2", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("anonymous v2: %d", r.Status)
	}

	denied := map[string]any{"provider_id": "metadata", "base_url": "http://169.254.169.254/v1", "api_key": "x"}
	if r := admin.Do("POST", "/api/system/model-providers", denied); r.Status != http.StatusUnprocessableEntity || r.Code() != "outbound_denied" {
		t.Fatalf("denied URL: %d %s", r.Status, r.Body)
	}
	if r := admin.Do("POST", "/api/system/model-providers", map[string]any{"provider_id": "fake", "base_url": vllm.URL()}); r.Status != http.StatusConflict {
		t.Fatalf("environment id: %d %s", r.Status, r.Body)
	}
	r := admin.Do("POST", "/api/system/model-providers", body)
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), key) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/api/system/model-providers", "/api/system/model-providers/vllm"} {
		got := admin.Do("GET", path, nil)
		if got.Status != http.StatusOK || strings.Contains(string(got.Body), key) || !strings.Contains(string(got.Body), `"has_api_key":true`) {
			t.Fatalf("GET %s: %d %s", path, got.Status, got.Body)
		}
	}
	list := admin.OK("GET", "/api/system/model-providers", nil)["data"].([]any)
	builtin := false
	for _, item := range list {
		m := item.(map[string]any)
		if m["provider_id"] == "fake" && m["is_builtin"] == true {
			builtin = true
		}
	}
	if !builtin {
		t.Fatalf("the environment's provider is not listed as built-in: %v", list)
	}

	remote := admin.OK("GET", "/api/system/model-providers/vllm/remote-models", nil)["data"].([]any)
	if len(remote) != 1 || remote[0].(map[string]any)["id"] != "fake-model" {
		t.Fatalf("remote models: %v", remote)
	}
	vllm.Enqueue(llmtest.Text("1"))
	st := admin.OK("GET", "/api/system/model-providers/models/status?spec=vllm/fake-model", nil)["data"].(map[string]any)
	if st["status"] != "available" {
		t.Fatalf("status: %v", st)
	}
	if reqs := vllm.Requests(); len(reqs) != 1 || reqs[0].Authorization != "Bearer "+key {
		t.Fatalf("the provider was not called with its key: %+v", reqs)
	}
	groups := user.OK("GET", "/api/system/model-providers/models/v2", nil)["data"].(map[string]any)
	if g, ok := groups["vllm"].(map[string]any); !ok || g["models"].([]any)[0].(map[string]any)["spec"] != "vllm:fake-model" {
		t.Fatalf("v2 models: %v", groups)
	}
	if got := admin.OK("POST", "/api/system/model-providers/models/cache/refresh", nil); got["model_count"].(float64) < 1 {
		t.Fatalf("refresh: %v", got)
	}
	if r := admin.Do("PUT", "/api/system/model-providers/fake", map[string]any{"display_name": "x"}); r.Status != http.StatusConflict || r.Code() != "builtin_provider" {
		t.Fatalf("update built-in: %d %s", r.Status, r.Body)
	}
	admin.OK("PUT", "/api/system/model-providers/vllm", map[string]any{"display_name": "Renamed"})
	admin.OK("DELETE", "/api/system/model-providers/vllm", nil)
	if r := admin.Do("GET", "/api/system/model-providers/vllm", nil); r.Status != http.StatusNotFound || r.Code() != "provider_not_found" {
		t.Fatalf("after delete: %d %s", r.Status, r.Body)
	}
}
