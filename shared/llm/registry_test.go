package llm_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
)

func provider(t *testing.T, reg *llm.Registry, id string) llm.Provider {
	t.Helper()
	p, ok := reg.Provider(id)
	if !ok {
		t.Fatalf("provider %q missing", id)
	}
	return p
}

func TestRegistryHasEveryTemplate(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"openai", "deepseek", "alibaba", "alibaba-coding-plan-cn", "alibaba-coding-plan", "zhipuai",
		"zhipuai-coding-plan", "zai", "zai-coding-plan", "xiaomi-token-plan-cn", "xiaomi", "kimi-for-coding",
		"moonshotai-cn", "moonshotai", "minimax-cn", "minimax", "openrouter", "modelscope", "opencode",
		"opencode-go", "siliconflow-cn", "siliconflow"}
	got := reg.Providers()
	if len(got) != len(ids) {
		t.Fatalf("%d providers, want %d", len(got), len(ids))
	}
	for i, id := range ids {
		p := got[i]
		if p.ID != id {
			t.Errorf("provider %d = %q, want %q (template order)", i, p.ID, id)
		}
		if !strings.HasPrefix(p.BaseURL, "https://") || p.HasAPIKey() || len(p.Capabilities) == 0 {
			t.Errorf("template %+v", p)
		}
	}
	if p := provider(t, reg, "siliconflow"); p.APIKeyEnv != "SILICONFLOW_GLOBAL_API_KEY" || p.BaseURL != "https://api.siliconflow.com/v1" {
		t.Errorf("siliconflow = %+v", p)
	}
	if p := provider(t, reg, "modelscope"); p.APIKeyEnv != "MODELSCOPE_ACCESS_TOKEN" {
		t.Errorf("modelscope = %+v", p)
	}
	if p := provider(t, reg, "opencode"); p.APIKeyEnv != "" {
		t.Errorf("opencode has no default key variable: %+v", p)
	}
	if reg.DefaultModel() != "" {
		t.Errorf("default model = %q", reg.DefaultModel())
	}
}

func TestTemplateKeysComeFromTheirVariables(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry([]string{
		"OPENAI_API_KEY=sk-openai",
		"DASHSCOPE_API_KEY=sk-dash",
		"SILICONFLOW_API_KEY=", // empty counts as unset
		"PATH=/usr/bin",
		"NOEQUALSIGN",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := provider(t, reg, "openai"); p.APIKey != "sk-openai" {
		t.Errorf("openai key = %q", p.APIKey)
	}
	for _, id := range []string{"alibaba", "alibaba-coding-plan-cn", "alibaba-coding-plan"} { // share DASHSCOPE_API_KEY
		if p := provider(t, reg, id); p.APIKey != "sk-dash" {
			t.Errorf("%s key = %q", id, p.APIKey)
		}
	}
	if provider(t, reg, "siliconflow-cn").HasAPIKey() {
		t.Error("empty SILICONFLOW_API_KEY should leave the key unset")
	}
}

func TestProviderOverridesFromEnvironment(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry([]string{
		"SILICONFLOW_API_KEY=sk-template",
		"YUXI_PROVIDER_SILICONFLOW_CN_BASE_URL=https://proxy.example.com/sf/v1/",
		"YUXI_PROVIDER_SILICONFLOW_CN_API_KEY=sk-override",
		"YUXI_PROVIDER_OPENCODE_GO_API_KEY=oc-key",
		"YUXI_PROVIDER_MY_VLLM_BASE_URL=http://10.0.0.5:8000/v1",
		"YUXI_PROVIDER_LOCAL_LLAMA_BASE_URL=http://localhost:8080/v1",
		"YUXI_PROVIDER_LOCAL_LLAMA_API_KEY=ll-key",
		"YUXI_DEFAULT_MODEL=my-vllm:Qwen/Qwen3-8B",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sf := provider(t, reg, "siliconflow-cn")
	if sf.BaseURL != "https://proxy.example.com/sf/v1" || sf.APIKey != "sk-override" || sf.DisplayName != "SiliconFlow" {
		t.Errorf("siliconflow-cn = %+v (key %q)", sf, sf.APIKey)
	}
	if p := provider(t, reg, "siliconflow"); p.BaseURL != "https://api.siliconflow.com/v1" {
		t.Errorf("siliconflow must not be touched by SILICONFLOW_CN: %+v", p)
	}
	if p := provider(t, reg, "opencode-go"); p.APIKey != "oc-key" || p.BaseURL != "https://opencode.ai/zen/go/v1" {
		t.Errorf("opencode-go = %+v", p)
	}
	vllm := provider(t, reg, "my-vllm")
	if vllm.BaseURL != "http://10.0.0.5:8000/v1" || vllm.HasAPIKey() || len(vllm.Capabilities) != 1 || vllm.Capabilities[0] != "chat" {
		t.Errorf("my-vllm = %+v", vllm)
	}
	if p := provider(t, reg, "local-llama"); p.APIKey != "ll-key" {
		t.Errorf("local-llama = %+v", p)
	}
	all := reg.Providers()
	if n := len(all); n != 24 || all[22].ID != "local-llama" || all[23].ID != "my-vllm" {
		t.Errorf("added providers should follow the templates, sorted: %d providers, tail %v", n, all[len(all)-2:])
	}
	if reg.DefaultModel() != "my-vllm:Qwen/Qwen3-8B" {
		t.Errorf("default model = %q", reg.DefaultModel())
	}
	if _, id, err := reg.ChatModel(reg.DefaultModel()); err != nil || id != "Qwen/Qwen3-8B" {
		t.Errorf("ChatModel(default) = %q, %v", id, err)
	}
}

func TestRegistryConfigurationErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  []string
		want string // the error must name this
	}{
		{[]string{"YUXI_PROVIDER_MYSTERY_API_KEY=k"}, "YUXI_PROVIDER_MYSTERY_BASE_URL"},
		{[]string{"YUXI_PROVIDER_OPENAI_BASE_URL=api.openai.com/v1"}, "YUXI_PROVIDER_OPENAI_BASE_URL"},
		{[]string{"YUXI_PROVIDER_OPENAI_BASE_URL=ftp://example.com/v1"}, "YUXI_PROVIDER_OPENAI_BASE_URL"},
		{[]string{"YUXI_PROVIDER_LOCAL_BASE_URL=/v1"}, "YUXI_PROVIDER_LOCAL_BASE_URL"},
		{[]string{"YUXI_PROVIDER_LOCAL_BASE_URL=http://user:pw@host/v1"}, "YUXI_PROVIDER_LOCAL_BASE_URL"},
		{[]string{"YUXI_PROVIDER__API_KEY=k"}, "YUXI_PROVIDER__API_KEY"},
		{[]string{"YUXI_DEFAULT_MODEL=nowhere:gpt-x"}, "YUXI_DEFAULT_MODEL"},
		{[]string{"YUXI_DEFAULT_MODEL=gpt-4o"}, "YUXI_DEFAULT_MODEL"},
		{[]string{"YUXI_DEFAULT_MODEL=openai:"}, "YUXI_DEFAULT_MODEL"},
	}
	for _, c := range cases {
		_, err := llm.LoadRegistry(c.env, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadRegistry(%q) = %v, want an error naming %s", c.env, err, c.want)
		}
	}
	if _, err := llm.LoadRegistry([]string{"YUXI_DEFAULT_MODEL=openai:gpt-4o-mini"}, nil); err != nil {
		t.Errorf("a template provider is a valid default: %v", err)
	}
}

func TestAPIKeysAreNeverMarshalled(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry([]string{"OPENAI_API_KEY=sk-secret-123", "YUXI_PROVIDER_LOCAL_BASE_URL=http://127.0.0.1:1/v1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(reg.Providers())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "sk-secret-123") {
		t.Fatalf("API key leaked into JSON: %s", b)
	}
	var decoded []map[string]any
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatal(err)
	}
	for _, p := range decoded {
		want := p["id"] == "openai"
		if p["has_api_key"] != want {
			t.Errorf("%v: has_api_key = %v, want %v", p["id"], p["has_api_key"], want)
		}
		if _, ok := p["api_key"]; ok {
			t.Errorf("%v: api_key field present", p["id"])
		}
	}
	openai := provider(t, reg, "openai")
	for _, s := range []string{fmt.Sprint(openai), fmt.Sprintf("%+v", openai), fmt.Sprintf("%#v", openai)} {
		if strings.Contains(s, "sk-secret-123") {
			t.Errorf("API key leaked through fmt: %s", s)
		}
	}
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	good := map[string][2]string{
		"siliconflow-cn:Pro/BAAI/bge-m3": {"siliconflow-cn", "Pro/BAAI/bge-m3"},
		"openrouter:qwen/qwen3:free":     {"openrouter", "qwen/qwen3:free"},
		"openai:gpt-4o":                  {"openai", "gpt-4o"},
	}
	for spec, want := range good {
		p, m, err := llm.ParseSpec(spec)
		if err != nil || p != want[0] || m != want[1] {
			t.Errorf("ParseSpec(%q) = %q, %q, %v", spec, p, m, err)
		}
	}
	for _, spec := range []string{"", "gpt-4o", ":gpt-4o", "openai:", "siliconflow-cn/Pro/BAAI/bge-m3"} {
		_, _, err := llm.ParseSpec(spec)
		fe, ok := failure.As(err)
		if !ok || fe.Code != "model_not_available" || fe.Kind != failure.KindUnprocessable {
			t.Errorf("ParseSpec(%q) err = %v", spec, err)
		}
	}
}

func TestChatModelForUnknownProvider(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, m, err := reg.ParseSpec("deepseek:deepseek-chat"); err != nil || p != "deepseek" || m != "deepseek-chat" {
		t.Errorf("Registry.ParseSpec = %q, %q, %v", p, m, err)
	}
	for _, spec := range []string{"anthropic:claude", "not-a-spec"} {
		if _, _, err := reg.ParseSpec(spec); err == nil {
			t.Errorf("Registry.ParseSpec(%q) accepted", spec)
		}
		m, _, err := reg.ChatModel(spec)
		fe, ok := failure.As(err)
		if m != nil || !ok || fe.Code != "model_not_available" || fe.Kind != failure.KindUnprocessable {
			t.Errorf("ChatModel(%q) = %v, %v", spec, m, err)
		}
	}
}

func TestRegistryParseSpecAcceptsBothForms(t *testing.T) {
	t.Parallel()
	reg, err := llm.LoadRegistry([]string{"YUXI_PROVIDER_MY_VLLM_BASE_URL=http://127.0.0.1:9/v1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string][2]string{
		"siliconflow-cn:Pro/BAAI/bge-m3": {"siliconflow-cn", "Pro/BAAI/bge-m3"},
		"siliconflow-cn/Pro/BAAI/bge-m3": {"siliconflow-cn", "Pro/BAAI/bge-m3"},
		"openrouter:qwen/qwen3:free":     {"openrouter", "qwen/qwen3:free"},
		"openrouter/qwen/qwen3:free":     {"openrouter", "qwen/qwen3:free"},
		"deepseek/deepseek-chat":         {"deepseek", "deepseek-chat"},
		"my-vllm/org/model:q4":           {"my-vllm", "org/model:q4"},
	} {
		p, m, err := reg.ParseSpec(spec)
		if err != nil || p != want[0] || m != want[1] {
			t.Errorf("ParseSpec(%q) = %q, %q, %v; want %v", spec, p, m, err, want)
		}
		norm, err := reg.NormalizeSpec(spec)
		if err != nil || norm != want[0]+":"+want[1] {
			t.Errorf("NormalizeSpec(%q) = %q, %v", spec, norm, err)
		}
		if _, id, err := reg.ChatModel(spec); err != nil || id != want[1] {
			t.Errorf("ChatModel(%q) = %q, %v", spec, id, err)
		}
	}
	for _, spec := range []string{"", "gpt-4o", "/gpt-4o", "openai/", "anthropic/claude", "qwen/qwen3:free"} {
		_, _, err := reg.ParseSpec(spec)
		if fe, ok := failure.As(err); !ok || fe.Code != "model_not_available" {
			t.Errorf("ParseSpec(%q) err = %v", spec, err)
		}
	}
}
