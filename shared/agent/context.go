// Package agent stores agent definitions (slug, backend, config_json.context,
// share_config) and defines the configurable context of the ChatbotAgent
// backend, from which the configuration form items are generated.
//
// Imported by: functions/intake (routes), shared/run (the context a run's
// steps use), shared/queue (model resolution), shared/bootstrap (wiring). May import: shared/access,
// shared/approval, shared/failure, shared/postgres, pgx.
package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// BackendChatbot is the only code-level agent backend so far.
const BackendChatbot = "ChatbotAgent"

// Limits and defaults of the context fields.
const (
	DefaultMaxExecutionSteps = 50
	MaxMaxExecutionSteps     = 500
	DefaultModelRetryTimes   = 2
	MaxModelRetryTimes       = 10
	DefaultSystemPrompt      = "You are a helpful assistant. Answer accurately and concisely, use the available tools when they help, and ask the user when a decision is theirs to make."
)

// Context is config_json.context: what an agent runs with. Fields not known
// to this version (knowledges, mcps, skills…) are kept untouched in Extra.
type Context struct {
	SystemPrompt      *string  `json:"system_prompt,omitempty"`
	Model             *string  `json:"model,omitempty"`
	Tools             []string `json:"tools,omitempty"`
	Knowledges        []string `json:"knowledges,omitempty"`
	MaxExecutionSteps *int     `json:"max_execution_steps,omitempty"`
	ModelRetryTimes   *int     `json:"model_retry_times,omitempty"`
	// Tool approval (shared/approval): the agent's default mode, per-tool
	// policies (allow | confirm | block) and how long a pending approval waits.
	ToolApprovalMode       *string                    `json:"tool_approval_mode,omitempty"`
	ToolPolicies           map[string]string          `json:"tool_policies,omitempty"`
	ToolApprovalTTLSeconds *int                       `json:"tool_approval_ttl_seconds,omitempty"`
	Extra                  map[string]json.RawMessage `json:"-"`
}

var knownContextFields = []string{"system_prompt", "model", "tools", "knowledges", "max_execution_steps", "model_retry_times",
	"tool_approval_mode", "tool_policies", "tool_approval_ttl_seconds"}

// UnmarshalJSON keeps unknown fields in Extra.
func (c *Context) UnmarshalJSON(b []byte) error {
	type plain Context
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range knownContextFields {
		delete(all, k)
	}
	*c = Context(p)
	if len(all) > 0 {
		c.Extra = all
	}
	return nil
}

// MarshalJSON writes known and unknown fields back.
func (c Context) MarshalJSON() ([]byte, error) {
	type plain Context
	b, err := json.Marshal(plain(c))
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range c.Extra {
		if _, known := all[k]; !known {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// Resolved is a context with defaults applied: what a run actually uses.
type Resolved struct {
	SystemPrompt      string   `json:"system_prompt"`
	Model             string   `json:"model"`
	Tools             []string `json:"tools"`      // nil: every available tool
	Knowledges        []string `json:"knowledges"` // nil: every knowledge base the user may read
	MaxExecutionSteps int      `json:"max_execution_steps"`
	ModelRetryTimes   int      `json:"model_retry_times"`
	// MCPs are the slugs of the MCP servers whose tools the agent may call
	// (context.mcps; kept in Context.Extra, read here). Empty: none.
	MCPs []string `json:"mcps,omitempty"`
	// ToolApprovalMode is the agent's mode ("" = default); a request or the
	// thread may override it at intake (run.Payload.ToolApprovalMode wins).
	ToolApprovalMode       string            `json:"tool_approval_mode,omitempty"`
	ToolPolicies           map[string]string `json:"tool_policies,omitempty"`
	ToolApprovalTTLSeconds int               `json:"tool_approval_ttl_seconds,omitempty"`
	// Subagents are the slugs of the sub-agents the task tools may start
	// (context.subagents). Empty: no sub-agent tools.
	Subagents []string `json:"subagents,omitempty"`
	// Summary is the context compression configuration (context.summary_*).
	Summary Summary `json:"summary"`
	// Skills are the slugs of the skills the agent may use (context.skills;
	// kept in Context.Extra, read here), PreloadSkills those active from the
	// first step (context.preload_skills). Empty: no skills.
	Skills        []string `json:"skills,omitempty"`
	PreloadSkills []string `json:"preload_skills,omitempty"`
}

// Summary configures context compression (see shared/compaction).
type Summary struct {
	// ThresholdK: compress when the context is estimated over this many
	// thousand tokens (0 never compresses).
	ThresholdK int `json:"threshold_k"`
	// KeepMessages: the newest messages kept verbatim by a summary (L2).
	KeepMessages int `json:"keep_messages"`
	// Prompt is the summary model's instruction.
	Prompt string `json:"prompt"`
	// ToolResultTokenLimit: L1 trims older tool results (and large tool
	// arguments) over this many tokens to a preview of that size.
	ToolResultTokenLimit int `json:"tool_result_token_limit"`
	// L2TriggerRatio: after L1, a summary is made when the context is still
	// over ThresholdK × this ratio.
	L2TriggerRatio float64 `json:"l2_trigger_ratio"`
}

// Defaults of the summary fields.
const (
	DefaultSummaryThresholdK       = 100
	DefaultSummaryKeepMessages     = 10
	DefaultSummaryToolResultTokens = 300
	DefaultSummaryL2TriggerRatio   = 0.4
	DefaultSummaryPrompt           = "Summarise the conversation so far for your own later use: the user's goals, decisions made, facts and results found (with where they came from), open questions and the next steps. Be complete but concise."
	maxSummaryThresholdK           = 2000
	maxSummaryKeepMessages         = 500
	maxSummaryToolResultTokenLimit = 100_000
)

// Resolve applies defaults.
func (c Context) Resolve() Resolved {
	r := Resolved{
		SystemPrompt:      DefaultSystemPrompt,
		MaxExecutionSteps: DefaultMaxExecutionSteps,
		ModelRetryTimes:   DefaultModelRetryTimes,
		Tools:             c.Tools,
		Knowledges:        c.Knowledges,
	}
	if c.SystemPrompt != nil {
		r.SystemPrompt = *c.SystemPrompt
	}
	if c.Model != nil {
		r.Model = *c.Model
	}
	if c.MaxExecutionSteps != nil {
		r.MaxExecutionSteps = *c.MaxExecutionSteps
	}
	if c.ModelRetryTimes != nil {
		r.ModelRetryTimes = *c.ModelRetryTimes
	}
	if c.ToolApprovalMode != nil {
		r.ToolApprovalMode = *c.ToolApprovalMode
	}
	r.ToolPolicies = c.ToolPolicies
	if c.ToolApprovalTTLSeconds != nil {
		r.ToolApprovalTTLSeconds = *c.ToolApprovalTTLSeconds
	}
	for k, dst := range map[string]*[]string{"skills": &r.Skills, "preload_skills": &r.PreloadSkills} {
		if raw, ok := c.Extra[k]; ok && (json.Unmarshal(raw, dst) != nil || len(*dst) == 0) {
			*dst = nil // not a list of strings, or empty
		}
	}
	if raw, ok := c.Extra["mcps"]; ok {
		if json.Unmarshal(raw, &r.MCPs) != nil || len(r.MCPs) == 0 {
			r.MCPs = nil // not a list of strings, or empty: no MCP servers
		}
	}
	if raw, ok := c.Extra["subagents"]; ok {
		if json.Unmarshal(raw, &r.Subagents) != nil || len(r.Subagents) == 0 {
			r.Subagents = nil
		}
	}
	r.Summary = Summary{ThresholdK: DefaultSummaryThresholdK, KeepMessages: DefaultSummaryKeepMessages, Prompt: DefaultSummaryPrompt,
		ToolResultTokenLimit: DefaultSummaryToolResultTokens, L2TriggerRatio: DefaultSummaryL2TriggerRatio}
	extraInt(c.Extra, "summary_threshold", &r.Summary.ThresholdK)
	extraInt(c.Extra, "summary_keep_messages", &r.Summary.KeepMessages)
	extraInt(c.Extra, "summary_tool_result_token_limit", &r.Summary.ToolResultTokenLimit)
	if raw, ok := c.Extra["summary_l2_trigger_ratio"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil && f > 0 && f <= 1 {
			r.Summary.L2TriggerRatio = f
		}
	}
	if raw, ok := c.Extra["summary_prompt"]; ok {
		var p string
		if json.Unmarshal(raw, &p) == nil && strings.TrimSpace(p) != "" {
			r.Summary.Prompt = p
		}
	}
	return r
}

// extraInt reads a non-negative integer field of Extra into dst (left
// unchanged when absent or not an integer).
func extraInt(extra map[string]json.RawMessage, key string, dst *int) {
	raw, ok := extra[key]
	if !ok {
		return
	}
	var n int
	if json.Unmarshal(raw, &n) == nil && n >= 0 {
		*dst = n
	}
}

// validateExtra checks the context fields kept in Extra that runs read.
func (c Context) validateExtra() error {
	for key, max := range map[string]int{"summary_threshold": maxSummaryThresholdK, "summary_keep_messages": maxSummaryKeepMessages,
		"summary_tool_result_token_limit": maxSummaryToolResultTokenLimit} {
		if raw, ok := c.Extra[key]; ok {
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 0 || n > max {
				return failure.Unprocessable("invalid_context", "%s must be an integer between 0 and %d", key, max)
			}
		}
	}
	if raw, ok := c.Extra["summary_l2_trigger_ratio"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) != nil || f <= 0 || f > 1 {
			return failure.Unprocessable("invalid_context", "summary_l2_trigger_ratio must be a number in (0, 1]")
		}
	}
	if raw, ok := c.Extra["summary_prompt"]; ok {
		var p string
		if json.Unmarshal(raw, &p) != nil || len(p) > 100_000 {
			return failure.Unprocessable("invalid_context", "summary_prompt must be a string of at most 100000 bytes")
		}
	}
	if raw, ok := c.Extra["tool_approval_mode"]; ok {
		var m string
		if json.Unmarshal(raw, &m) != nil || (m != "" && m != "default" && m != "always_trust") {
			return failure.Unprocessable("invalid_context", "tool_approval_mode must be default or always_trust")
		}
	}
	return nil
}

// Validate checks field ranges, the model spec format and tool names.
// knownTool may be nil to skip tool checks.
func (c Context) Validate(knownTool func(name string) bool) error {
	if c.SystemPrompt != nil && len(*c.SystemPrompt) > 100_000 {
		return failure.Unprocessable("invalid_context", "system_prompt is longer than 100000 bytes")
	}
	if c.Model != nil && *c.Model != "" {
		if i := strings.Index(*c.Model, ":"); i <= 0 || i == len(*c.Model)-1 {
			return failure.Unprocessable("invalid_context", "model must be provider_id:model_id, got %q", *c.Model)
		}
	}
	if c.MaxExecutionSteps != nil && (*c.MaxExecutionSteps < 1 || *c.MaxExecutionSteps > MaxMaxExecutionSteps) {
		return failure.Unprocessable("invalid_context", "max_execution_steps must be between 1 and %d", MaxMaxExecutionSteps)
	}
	if c.ModelRetryTimes != nil && (*c.ModelRetryTimes < 0 || *c.ModelRetryTimes > MaxModelRetryTimes) {
		return failure.Unprocessable("invalid_context", "model_retry_times must be between 0 and %d", MaxModelRetryTimes)
	}
	if c.ToolApprovalMode != nil && !approval.ValidMode(*c.ToolApprovalMode) {
		return approval.ErrInvalidMode
	}
	for name, p := range c.ToolPolicies {
		if name == "" || len(name) > 128 || !approval.ValidPolicy(p) {
			return failure.Unprocessable("invalid_context", "tool_policies maps tool names to allow, confirm or block (got %q: %q)", name, p)
		}
	}
	if c.ToolApprovalTTLSeconds != nil {
		if ttl := time.Duration(*c.ToolApprovalTTLSeconds) * time.Second; ttl < approval.MinTTL || ttl > approval.MaxTTL {
			return failure.Unprocessable("invalid_context", "tool_approval_ttl_seconds must be between %d and %d",
				int(approval.MinTTL.Seconds()), int(approval.MaxTTL.Seconds()))
		}
	}
	if knownTool != nil {
		for _, t := range c.Tools {
			if !knownTool(t) {
				return failure.Unprocessable("invalid_context", "unknown tool %q", t)
			}
		}
	}
	for _, k := range c.Knowledges {
		if k == "" || len(k) > 128 {
			return failure.Unprocessable("invalid_context", "knowledges must list knowledge base ids")
		}
	}
	if len(c.Tools) != len(uniq(c.Tools)) {
		return failure.Unprocessable("invalid_context", "tools contains duplicates")
	}
	return c.validateExtra()
}

func uniq(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

// Option is a choice offered by a configurable item.
type Option struct {
	Value       string `json:"value"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Item describes one configurable context field for the configuration form.
type Item struct {
	Key         string   `json:"key"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Type        string   `json:"type"` // str | int | list
	Kind        string   `json:"kind"` // prompt | llm | tools | number
	Default     any      `json:"default"`
	Options     []Option `json:"options,omitempty"`
	Min         *int     `json:"min,omitempty"`
	Max         *int     `json:"max,omitempty"`
	AdminOnly   bool     `json:"admin_only"`
}

// Items generates the configurable items of the ChatbotAgent context, in form
// order. toolOptions are the selectable tools; admins see every item, other
// roles only the items not marked admin-only.
func Items(toolOptions []Option, admin bool) []Item {
	one, maxSteps, maxRetry, zero := 1, MaxMaxExecutionSteps, MaxModelRetryTimes, 0
	maxThreshold, maxKeep, maxToolTokens := maxSummaryThresholdK, maxSummaryKeepMessages, maxSummaryToolResultTokenLimit
	all := []Item{
		{Key: "system_prompt", Name: "System prompt", Description: "Instructions the model receives before the conversation.", Type: "str", Kind: "prompt", Default: DefaultSystemPrompt},
		{Key: "model", Name: "Model", Description: "Chat model as provider_id:model_id; empty uses the system default.", Type: "str", Kind: "llm", Default: ""},
		{Key: "tools", Name: "Tools", Description: "Tools the agent may call; empty enables every available tool. ask_user_question and mark_for_improvement are always available.", Type: "list", Kind: "tools", Default: []string{}, Options: toolOptions},
		{Key: "knowledges", Name: "Knowledge bases", Description: "Knowledge bases the agent may search (kb ids); empty means every knowledge base the user may read.", Type: "list", Kind: "knowledges", Default: []string{}},
		{Key: "max_execution_steps", Name: "Max execution steps", Description: "Upper bound on model turns in one run.", Type: "int", Kind: "number", Default: DefaultMaxExecutionSteps, Min: &one, Max: &maxSteps, AdminOnly: true},
		{Key: "model_retry_times", Name: "Model retry times", Description: "How often a failed model call is retried.", Type: "int", Kind: "number", Default: DefaultModelRetryTimes, Min: &zero, Max: &maxRetry, AdminOnly: true},
		{Key: "mcps", Name: "MCP servers", Description: "MCP servers (slugs) whose tools the agent may call; empty: none.", Type: "list", Kind: "mcps", Default: []string{}},
		{Key: "skills", Name: "Skills", Description: "Skills (slugs) listed to the agent.", Type: "list", Kind: "skills", Default: []string{}},
		{Key: "preload_skills", Name: "Preloaded skills", Description: "Skills active from the first turn.", Type: "list", Kind: "skills", Default: []string{}},
		{Key: "subagents", Name: "Sub-agents", Description: "Sub-agents (slugs of agents with is_subagent) the task tools may start; empty: no sub-agent tools.", Type: "list", Kind: "subagents", Default: []string{}},
		{Key: "tool_approval_mode", Name: "Tool approval mode", Description: "default asks before tools with effects; always_trust runs them.", Type: "str", Kind: "select", Default: "default",
			Options: []Option{{Value: "default", Label: "Ask for approval"}, {Value: "always_trust", Label: "Always trust"}}},
		{Key: "summary_threshold", Name: "Summary threshold (K tokens)", Description: "Compress the context when it is estimated over this many thousand tokens; 0 never compresses.", Type: "int", Kind: "number", Default: DefaultSummaryThresholdK, Min: &zero, Max: &maxThreshold, AdminOnly: true},
		{Key: "summary_keep_messages", Name: "Messages kept by a summary", Description: "The newest messages a summary keeps verbatim.", Type: "int", Kind: "number", Default: DefaultSummaryKeepMessages, Min: &zero, Max: &maxKeep, AdminOnly: true},
		{Key: "summary_prompt", Name: "Summary prompt", Description: "Instruction of the summary model turn.", Type: "str", Kind: "prompt", Default: DefaultSummaryPrompt, AdminOnly: true},
		{Key: "summary_tool_result_token_limit", Name: "Tool result preview (tokens)", Description: "Older tool results and large tool arguments over this many tokens are trimmed to a preview of this size in the model's view (stored messages are unchanged).", Type: "int", Kind: "number", Default: DefaultSummaryToolResultTokens, Min: &zero, Max: &maxToolTokens, AdminOnly: true},
		{Key: "summary_l2_trigger_ratio", Name: "Summary trigger ratio after trimming", Description: "After trimming, a summary is made when the context is still over threshold × ratio (0.1–1.0).", Type: "float", Kind: "number", Default: DefaultSummaryL2TriggerRatio, AdminOnly: true},
	}
	if admin {
		return all
	}
	out := all[:0:0]
	for _, it := range all {
		if !it.AdminOnly {
			out = append(out, it)
		}
	}
	return out
}

// ParseContext reads config_json.context out of a config_json document.
func ParseContext(configJSON json.RawMessage) (Context, error) {
	var doc struct {
		Context *Context `json:"context"`
	}
	if len(configJSON) == 0 {
		return Context{}, nil
	}
	if err := json.Unmarshal(configJSON, &doc); err != nil {
		return Context{}, failure.Unprocessable("invalid_config_json", "config_json is not valid: %v", err)
	}
	if doc.Context == nil {
		return Context{}, nil
	}
	return *doc.Context, nil
}
