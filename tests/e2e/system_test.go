package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/llm/llmtest"
	"github.com/yuxi-serverless/yuxi/tests/testkit"
)

// System settings written through one instance are served by another within
// the stated bound (sysconfig.Store.CheckEvery, 1s), and readiness checks the
// dependencies.
func TestSystemConfigAcrossInstances(t *testing.T) {
	t.Parallel()
	a := testkit.StartLocal(t, nil)
	b := testkit.StartLocalOn(t, a.Stack, nil)
	adminB := (&testkit.Client{T: t, Base: b.URL}).Login("admin", "admin-password")
	user := a.Admin.NewUser("sysuser")

	if r := a.Admin.Do("GET", "/api/system/ready", nil); r.Status != http.StatusOK || r.JSON()["status"] != "ready" {
		t.Fatalf("ready: %d %s", r.Status, r.Body)
	}
	if r := user.Do("GET", "/api/system/discovery", nil); r.Status != http.StatusOK {
		t.Fatalf("discovery: %d", r.Status)
	}
	before := adminB.OK("GET", "/api/system/config", nil)
	if before["enable_content_guard"] != false {
		t.Fatalf("default config: %v", before)
	}
	a.Admin.OK("POST", "/api/system/config", map[string]any{"key": "enable_content_guard", "value": true})
	a.Admin.OK("POST", "/api/system/config/update", map[string]any{"content_guard_keywords": []string{"forbidden"}, "fast_model": "p:m"})
	a.Admin.OK("PUT", "/api/system/config/options/default_ocr_method", `"disable"`)

	deadline := time.Now().Add(10 * time.Second)
	for {
		got := user.As("").Do("GET", "/api/system/info", nil) // public
		if got.Status != http.StatusOK {
			t.Fatalf("info: %d", got.Status)
		}
		cfg := adminB.OK("GET", "/api/system/config", nil)
		if cfg["enable_content_guard"] == true && cfg["fast_model"] == "p:m" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance b never saw the update: %v", cfg)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The keyword list applies to user input at intake, on the other
	// instance too, without a restart; input without a keyword goes through.
	userB := user.As(user.Token)
	userB.Base = b.URL
	th := userB.Thread()
	body := map[string]any{"query": "tell me the FORBIDDEN thing", "agent_slug": "default-chatbot", "thread_id": th}
	if r := userB.Do("POST", "/api/agent/runs", body); r.Status != http.StatusBadRequest || r.Code() != "content_guard_blocked" {
		t.Fatalf("blocked input: %d %s", r.Status, r.Body)
	}
	b.LLM.Enqueue(llmtest.Reply{Chunks: []llmtest.Chunk{{Content: "hello"}}})
	if got := userB.Submit(th, "hello there", nil); got["run_id"] == nil {
		t.Fatalf("clean input refused: %v", got)
	}

	// Bad input is a coded 4xx, and a user cannot write settings.
	for _, c := range []struct {
		body any
		code string
	}{
		{map[string]any{"key": "no_such_key", "value": 1}, "unknown_config_key"},
		{map[string]any{"key": "enable_content_guard", "value": "yes"}, "invalid_config_value"},
		{map[string]any{"key": "fast_model"}, "invalid_config"},
	} {
		if r := a.Admin.Do("POST", "/api/system/config", c.body); r.Status/100 != 4 || r.Code() != c.code {
			t.Errorf("%v: %d %s", c.body, r.Status, r.Body)
		}
	}
	if r := user.Do("POST", "/api/system/config", map[string]any{"key": "fast_model", "value": "x"}); r.Status != http.StatusForbidden {
		t.Errorf("user wrote config: %d", r.Status)
	}
	opts := a.Admin.OK("GET", "/api/system/config/options", nil)
	if _, ok := opts["options"].([]any); !ok {
		t.Errorf("options: %v", opts)
	}
	if r := a.Admin.OK("POST", "/api/system/info/reload", nil); r["version"] == nil {
		t.Errorf("reload: %v", r)
	}
	if r := user.OK("GET", "/api/system/ocr/options", nil); r["default"] != "disable" {
		t.Errorf("ocr options: %v", r)
	}
}
