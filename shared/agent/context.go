// Package agent stores agent definitions (slug, backend, config_json.context,
// share_config) and defines the configurable context of the ChatbotAgent
// backend, from which the configuration form items are generated.
//
// Imported by: functions/intake (routes), shared/run (the context a run's
// steps use), shared/queue (model resolution), shared/bootstrap (wiring). May import: shared/access,
// shared/failure, shared/postgres, pgx.
package agent

import (
	"encoding/json"
	"slices"
	"strings"

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
	SystemPrompt      *string                    `json:"system_prompt,omitempty"`
	Model             *string                    `json:"model,omitempty"`
	Tools             []string                   `json:"tools,omitempty"`
	Knowledges        []string                   `json:"knowledges,omitempty"`
	MaxExecutionSteps *int                       `json:"max_execution_steps,omitempty"`
	ModelRetryTimes   *int                       `json:"model_retry_times,omitempty"`
	Extra             map[string]json.RawMessage `json:"-"`
}

var knownContextFields = []string{"system_prompt", "model", "tools", "knowledges", "max_execution_steps", "model_retry_times"}

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
	// Skills are the slugs of the skills the agent may use (context.skills;
	// kept in Context.Extra, read here), PreloadSkills those active from the
	// first step (context.preload_skills). Empty: no skills.
	Skills        []string `json:"skills,omitempty"`
	PreloadSkills []string `json:"preload_skills,omitempty"`
}

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
	return r
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
	return nil
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
	all := []Item{
		{Key: "system_prompt", Name: "System prompt", Description: "Instructions the model receives before the conversation.", Type: "str", Kind: "prompt", Default: DefaultSystemPrompt},
		{Key: "model", Name: "Model", Description: "Chat model as provider_id:model_id; empty uses the system default.", Type: "str", Kind: "llm", Default: ""},
		{Key: "tools", Name: "Tools", Description: "Tools the agent may call; empty enables every available tool. ask_user_question and mark_for_improvement are always available.", Type: "list", Kind: "tools", Default: []string{}, Options: toolOptions},
		{Key: "knowledges", Name: "Knowledge bases", Description: "Knowledge bases the agent may search (kb ids); empty means every knowledge base the user may read.", Type: "list", Kind: "knowledges", Default: []string{}},
		{Key: "max_execution_steps", Name: "Max execution steps", Description: "Upper bound on model turns in one run.", Type: "int", Kind: "number", Default: DefaultMaxExecutionSteps, Min: &one, Max: &maxSteps, AdminOnly: true},
		{Key: "model_retry_times", Name: "Model retry times", Description: "How often a failed model call is retried.", Type: "int", Kind: "number", Default: DefaultModelRetryTimes, Min: &zero, Max: &maxRetry, AdminOnly: true},
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
