// Package tool is the tool registry and the builtin tools. A tool has a stable
// name (the model protocol id), a display name and category for people, a JSON
// Schema for its arguments, and an Invoke that runs exactly one call.
//
// Registration is not authorization: tools re-check the caller (user, run,
// target resource) where the effect happens. Tool calls are delivered
// at-least-once; Call.ToolCallID is the idempotency key tools with side
// effects deduplicate on.
//
// Imported by: functions/agent-step (specs for the model), functions/tool-invoke
// (execution), functions/intake (listings). May import: shared/postgres,
// shared/failure, pgx.
package tool

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
)

// Spec describes a tool.
type Spec struct {
	Name        string          `json:"name"`
	DisplayName string          `json:"display_name"`
	Category    string          `json:"category"`
	Tags        []string        `json:"tags"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Base tools are available to every agent regardless of its tool selection.
	Base bool `json:"base"`
}

// Call is one tool invocation.
type Call struct {
	RunID      string
	ToolCallID string // idempotency key
	StepNo     int
	ThreadID   string
	UID        string
	AgentSlug  string
	Arguments  string // raw JSON text produced by the model
}

// Result is what the model gets back. IsError marks a tool-level failure
// (bad arguments, a refused action): the run continues and the model sees it.
type Result struct {
	Output  string
	IsError bool
	// Interrupt, when set, makes the run stop as interrupted until the user answers.
	Interrupt *Interrupt
	// Deferred: the tool has arranged for its result to be recorded later by
	// someone else (a sub-agent call completes when the child run's
	// run.finished event is handled); tool-invoke records nothing now and no
	// function waits.
	Deferred bool
}

// Interrupt asks the user for input.
type Interrupt struct {
	Kind    string // error_type of the interrupted run, e.g. ask_user_question_required
	Message string // shown as the run's error_message
	// Payload is stored as the call's pending output and shown to clients.
	Payload map[string]any
}

// Errorf returns a tool-level error result.
func Errorf(msg string) Result { return Result{Output: "Error: " + msg, IsError: true} }

// Tool is one registered tool. Invoke returns an error only for failures that
// may succeed when retried (infrastructure); anything the model should see is
// a Result.
type Tool interface {
	Spec() Spec
	Invoke(ctx context.Context, c Call) (Result, error)
}

// Registry holds the tools of a process. Build it at start-up; read-only after.
type Registry struct {
	tools map[string]Tool
}

// NewRegistry registers tools; a later tool with the same name replaces an earlier one.
func NewRegistry(tools ...Tool) *Registry {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		r.tools[t.Spec().Name] = t
	}
	return r
}

// Get returns a tool by name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool { _, ok := r.tools[name]; return ok }

// Specs lists every tool, sorted by name.
func (r *Registry) Specs() []Spec {
	out := make([]Spec, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Spec())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Visible returns the tools a run may offer the model: every base tool plus
// the configured ones (all tools when configured is nil or empty).
func (r *Registry) Visible(configured []string) []Spec {
	var out []Spec
	for _, s := range r.Specs() {
		if s.Base || len(configured) == 0 || slices.Contains(configured, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// JSON encodes a tool result for the model: compact, and without Go's HTML
// escaping, so a passage's "<", ">" and "&" reach the model as written (not
// as \u003c, \u003e, \u0026, which cost tokens and garble quoted text).
func JSON(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Listing is a tool as GET /api/system/tools shows it (the original's
// tool_router rows): slug is the stable tool name the model calls, name the
// display name people read.
type Listing struct {
	ID          string          `json:"id"`
	Slug        string          `json:"slug"`
	Name        string          `json:"name"`
	DisplayName string          `json:"display_name"`
	Description string          `json:"description"`
	Category    string          `json:"category"`
	Tags        []string        `json:"tags"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ListingOption is one entry of GET /api/system/tools/options (a UI drop-down).
type ListingOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// Listings returns the registered tools of a category ("" for all), sorted
// by slug.
func (r *Registry) Listings(category string) []Listing {
	out := []Listing{}
	for _, s := range r.Specs() {
		if category != "" && s.Category != category {
			continue
		}
		display := s.DisplayName
		if display == "" {
			display = s.Name
		}
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, Listing{ID: s.Name, Slug: s.Name, Name: display, DisplayName: display, Description: s.Description,
			Category: s.Category, Tags: tags, Parameters: s.Parameters})
	}
	return out
}

// Options returns every tool as {label: display name, value: slug}.
func (r *Registry) Options() []ListingOption {
	ls := r.Listings("")
	out := make([]ListingOption, len(ls))
	for i, l := range ls {
		out[i] = ListingOption{Label: l.Name, Value: l.Slug}
	}
	return out
}
