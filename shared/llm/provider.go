package llm

import (
	"encoding/json"
	"fmt"
)

// Provider capabilities.
const (
	CapChat      = "chat"
	CapEmbedding = "embedding"
	CapRerank    = "rerank"
)

// Provider is an OpenAI-compatible endpoint. The API key never leaves the
// process in JSON (tag "-"; HasAPIKey tells whether one is set) nor through
// fmt (String and GoString redact it).
type Provider struct {
	ID           string   `json:"id"`
	DisplayName  string   `json:"display_name"`
	BaseURL      string   `json:"base_url"`
	APIKey       string   `json:"-"`
	APIKeyEnv    string   `json:"api_key_env,omitempty"` // where the key is read from, "" when none by default
	Capabilities []string `json:"capabilities"`
}

// HasAPIKey reports whether a key is configured.
func (p Provider) HasAPIKey() bool { return p.APIKey != "" }

// MarshalJSON adds has_api_key, and only that, about the key.
func (p Provider) MarshalJSON() ([]byte, error) {
	type plain Provider // no methods: avoids recursion; APIKey stays tagged "-"
	return json.Marshal(struct {
		plain
		HasAPIKey bool `json:"has_api_key"`
	}{plain(p), p.HasAPIKey()})
}

func (p Provider) String() string {
	return fmt.Sprintf("{ID:%s DisplayName:%s BaseURL:%s APIKeyEnv:%s HasAPIKey:%t Capabilities:%v}",
		p.ID, p.DisplayName, p.BaseURL, p.APIKeyEnv, p.HasAPIKey(), p.Capabilities)
}

func (p Provider) GoString() string { return "llm.Provider" + p.String() }

// Templates returns the built-in providers of the original product (same ids,
// display names and key variables as its provider table). The base URLs are
// the providers' public OpenAI-compatible endpoints as known when this was
// written; they are templates, and YUXI_PROVIDER_<ID>_BASE_URL overrides any
// of them (see LoadRegistry). A fresh slice is returned on every call.
func Templates() []Provider {
	chat := func() []string { return []string{CapChat} }
	all := func() []string { return []string{CapChat, CapEmbedding, CapRerank} }
	return []Provider{
		{ID: "openai", DisplayName: "OpenAI", BaseURL: "https://api.openai.com/v1", APIKeyEnv: "OPENAI_API_KEY", Capabilities: chat()},
		{ID: "deepseek", DisplayName: "DeepSeek", BaseURL: "https://api.deepseek.com/v1", APIKeyEnv: "DEEPSEEK_API_KEY", Capabilities: chat()},
		{ID: "alibaba", DisplayName: "DashScope", BaseURL: "https://dashscope.aliyuncs.com/compatible-mode/v1", APIKeyEnv: "DASHSCOPE_API_KEY", Capabilities: all()},
		{ID: "alibaba-coding-plan-cn", DisplayName: "Aliyun Coding Plan", BaseURL: "https://coding.dashscope.aliyuncs.com/v1", APIKeyEnv: "DASHSCOPE_API_KEY", Capabilities: chat()},
		{ID: "alibaba-coding-plan", DisplayName: "Aliyun Coding Plan International", BaseURL: "https://coding-intl.dashscope.aliyuncs.com/v1", APIKeyEnv: "DASHSCOPE_API_KEY", Capabilities: chat()},
		{ID: "zhipuai", DisplayName: "Zhipu BigModel", BaseURL: "https://open.bigmodel.cn/api/paas/v4", APIKeyEnv: "ZHIPUAI_API_KEY", Capabilities: chat()},
		{ID: "zhipuai-coding-plan", DisplayName: "Zhipu BigModel Coding Plan", BaseURL: "https://open.bigmodel.cn/api/coding/paas/v4", APIKeyEnv: "ZHIPUAI_API_KEY", Capabilities: chat()},
		{ID: "zai", DisplayName: "Z.AI", BaseURL: "https://api.z.ai/api/paas/v4", APIKeyEnv: "ZAI_API_KEY", Capabilities: chat()},
		{ID: "zai-coding-plan", DisplayName: "Z.AI Coding Plan", BaseURL: "https://api.z.ai/api/coding/paas/v4", APIKeyEnv: "ZAI_API_KEY", Capabilities: chat()},
		{ID: "xiaomi-token-plan-cn", DisplayName: "XiaomiMiMo Token Plan", BaseURL: "https://token-plan-cn.xiaomimimo.com/v1", APIKeyEnv: "XIAOMI_MIMO_TOKEN_PLAN_API_KEY", Capabilities: chat()},
		{ID: "xiaomi", DisplayName: "XiaomiMiMo", BaseURL: "https://api.xiaomimimo.com/v1", APIKeyEnv: "XIAOMI_MIMO_API_KEY", Capabilities: chat()},
		{ID: "kimi-for-coding", DisplayName: "Kimi Code", BaseURL: "https://api.kimi.com/coding/v1", APIKeyEnv: "KIMI_CODE_API_KEY", Capabilities: chat()},
		{ID: "moonshotai-cn", DisplayName: "Moonshot", BaseURL: "https://api.moonshot.cn/v1", APIKeyEnv: "MOONSHOT_API_KEY", Capabilities: chat()},
		{ID: "moonshotai", DisplayName: "Moonshot International", BaseURL: "https://api.moonshot.ai/v1", APIKeyEnv: "MOONSHOT_API_KEY", Capabilities: chat()},
		{ID: "minimax-cn", DisplayName: "MiniMax", BaseURL: "https://api.minimaxi.com/v1", APIKeyEnv: "MINIMAX_API_KEY", Capabilities: chat()},
		{ID: "minimax", DisplayName: "MiniMax International", BaseURL: "https://api.minimax.io/v1", APIKeyEnv: "MINIMAX_API_KEY", Capabilities: chat()},
		{ID: "openrouter", DisplayName: "OpenRouter", BaseURL: "https://openrouter.ai/api/v1", APIKeyEnv: "OPENROUTER_API_KEY", Capabilities: []string{CapChat, CapEmbedding}},
		{ID: "modelscope", DisplayName: "ModelScope", BaseURL: "https://api-inference.modelscope.cn/v1", APIKeyEnv: "MODELSCOPE_ACCESS_TOKEN", Capabilities: chat()},
		// OpenCode has no default key variable in the original; set
		// YUXI_PROVIDER_OPENCODE_API_KEY / YUXI_PROVIDER_OPENCODE_GO_API_KEY.
		{ID: "opencode", DisplayName: "OpenCode", BaseURL: "https://opencode.ai/zen/v1", Capabilities: chat()},
		{ID: "opencode-go", DisplayName: "OpenCode Go", BaseURL: "https://opencode.ai/zen/go/v1", Capabilities: chat()},
		{ID: "siliconflow-cn", DisplayName: "SiliconFlow", BaseURL: "https://api.siliconflow.cn/v1", APIKeyEnv: "SILICONFLOW_API_KEY", Capabilities: all()},
		{ID: "siliconflow", DisplayName: "SiliconFlow International", BaseURL: "https://api.siliconflow.com/v1", APIKeyEnv: "SILICONFLOW_GLOBAL_API_KEY", Capabilities: all()},
	}
}
