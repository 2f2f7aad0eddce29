// Package approval is tool approval: which tool calls of a run wait for a
// person's decision before they run, what the waiting call stores (the
// original's HumanInTheLoop interrupt: action_requests and review_configs),
// how a resume's decisions are read, and what the model is told when a call
// is rejected or its approval expired.
//
// The mode (default | always_trust) is frozen in a run's input payload at
// intake (request → thread override → agent context → default). In default
// mode write_file, edit_file and execute wait for approval; an agent's
// tool_policies (allow | confirm | block per tool) override that for any
// tool. always_trust turns confirm into allow; block stays block.
//
// Pure functions: the state lives in the tool call rows (shared/run).
//
// Imported by: shared/run, shared/agent, shared/queue, functions/tool-invoke,
// tests. May import: shared/failure and the standard library.
package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Modes (tool_approval_mode).
const (
	ModeDefault     = "default"
	ModeAlwaysTrust = "always_trust"
)

// Policies of one tool (tool_policies values).
const (
	Allow   = "allow"
	Confirm = "confirm"
	Block   = "block"
)

// Decision types of a resume.
const (
	Approve = "approve"
	Reject  = "reject"
)

// InterruptKind is the error_type of a run waiting for an approval and the
// status of its interrupt chunk (the original's `human_approval_required`).
const InterruptKind = "human_approval_required"

// InterruptReason is the `reason` of the run's `interrupt` stream event, as
// the original names it (spec §3.7: `human_approval`); readers accept
// InterruptKind too (what this platform sent before).
const InterruptReason = "human_approval"

// Source names the interrupt's origin in the stream's interrupt chunk.
const Source = "tool_approval"

// DefaultTTL is how long a pending approval waits when the agent sets no
// tool_approval_ttl_seconds; MaxTTL bounds that setting.
const (
	DefaultTTL = 24 * time.Hour
	MinTTL     = time.Minute
	MaxTTL     = 30 * 24 * time.Hour
)

// ConfirmedByDefault are the tools that wait for approval in default mode
// (the original's interrupt_on set).
var ConfirmedByDefault = []string{"write_file", "edit_file", "execute"}

// neverConfirmed tools ask the user themselves; waiting for an approval to
// ask a question makes no sense (block still applies).
var neverConfirmed = []string{"ask_user_question"}

// ValidMode reports whether m is a tool_approval_mode ("" counts as default).
func ValidMode(m string) bool { return m == "" || m == ModeDefault || m == ModeAlwaysTrust }

// ErrInvalidMode is the machine-readable refusal of an unknown mode.
var ErrInvalidMode = failure.Unprocessable("invalid_tool_approval_mode", "tool_approval_mode must be default or always_trust")

// CheckMode returns ErrInvalidMode for an unknown mode.
func CheckMode(m string) error {
	if !ValidMode(m) {
		return ErrInvalidMode
	}
	return nil
}

// ValidPolicy reports whether p is allow, confirm or block.
func ValidPolicy(p string) bool { return p == Allow || p == Confirm || p == Block }

// Decide returns what happens to a call of tool name in a run with mode and
// the agent's per-tool policies: Allow (run it), Confirm (wait for approval)
// or Block (refuse it).
func Decide(mode string, policies map[string]string, name string) string {
	p, ok := policies[name]
	if !ok || !ValidPolicy(p) {
		p = Allow
		if slices.Contains(ConfirmedByDefault, name) {
			p = Confirm
		}
	}
	if p == Confirm && (mode == ModeAlwaysTrust || slices.Contains(neverConfirmed, name)) {
		p = Allow
	}
	return p
}

// ActionRequest is one call waiting for approval (the original's shape).
type ActionRequest struct {
	Name        string          `json:"name"`
	Args        json.RawMessage `json:"args"`
	Description string          `json:"description"`
	ToolCallID  string          `json:"tool_call_id"`
}

// ReviewConfig says which decisions an action allows.
type ReviewConfig struct {
	ActionName       string   `json:"action_name"`
	AllowedDecisions []string `json:"allowed_decisions"`
}

// Approval is the approval part of the interrupt.
type Approval struct {
	ActionRequests []ActionRequest `json:"action_requests"`
	ReviewConfigs  []ReviewConfig  `json:"review_configs"`
}

// Pending is what a call waiting for approval stores as its output (and,
// once approved, keeps until its real result replaces it).
type Pending struct {
	Interrupt string    `json:"interrupt"` // InterruptKind
	Source    string    `json:"source"`    // Source
	Approval  Approval  `json:"approval"`
	ExpiresAt time.Time `json:"expires_at"`
	// Decision is set when the call was approved by a resume (the call then
	// runs in ResumeRunID).
	Decision    string     `json:"decision,omitempty"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	ResumeRunID string     `json:"resume_run_id,omitempty"`
}

// NewPending is the stored interrupt of call toolCallID of tool name with
// arguments args (the model's JSON text), expiring ttl after now.
func NewPending(name, toolCallID, args string, now time.Time, ttl time.Duration) Pending {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	raw := json.RawMessage(args)
	if !json.Valid(raw) {
		b, _ := json.Marshal(args)
		raw = b
	}
	return Pending{
		Interrupt: InterruptKind, Source: Source, ExpiresAt: now.Add(ttl).UTC().Truncate(time.Millisecond),
		Approval: Approval{
			ActionRequests: []ActionRequest{{Name: name, Args: raw, ToolCallID: toolCallID,
				Description: fmt.Sprintf("Tool execution requires approval\n\nTool: %s\nArgs: %s", name, string(raw))}},
			ReviewConfigs: []ReviewConfig{{ActionName: name, AllowedDecisions: []string{Approve, Reject}}},
		},
	}
}

// Message is the run's error_message for a call of tool name waiting.
func Message(name string) string {
	return fmt.Sprintf("the tool call %s waits for your approval", name)
}

// Parse reads a call's stored output as a Pending; false when it is not one.
func Parse(output *string) (Pending, bool) {
	if output == nil {
		return Pending{}, false
	}
	var p Pending
	if json.Unmarshal([]byte(*output), &p) != nil || p.Interrupt != InterruptKind {
		return Pending{}, false
	}
	return p, true
}

// Approved reports whether a call's stored output says it was approved: the
// call runs without asking again.
func Approved(output *string) bool {
	p, ok := Parse(output)
	return ok && p.Decision == Approve
}

// Decision is one entry of resume.decisions.
type Decision struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// Decisions reads resume.decisions; ok is false when the resume has none
// (an answer to questions).
func Decisions(resume json.RawMessage) (out []Decision, ok bool, err error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(resume, &obj) != nil {
		return nil, false, nil
	}
	raw, has := obj["decisions"]
	if !has {
		return nil, false, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) == 0 {
		return nil, true, failure.Unprocessable("invalid_resume", "decisions must be a non-empty list")
	}
	for _, d := range out {
		if d.Type != Approve && d.Type != Reject {
			return nil, true, failure.Unprocessable("invalid_resume", "each decision type must be approve or reject")
		}
	}
	return out, true, nil
}

// Errors of a resume that answers approvals.
var (
	ErrDecisionsRequired = failure.Unprocessable("decisions_required", "the run waits for tool approvals: resume with {\"decisions\":[{\"type\":\"approve\"|\"reject\"}]}")
	ErrNoPendingApproval = failure.Unprocessable("no_pending_approval", "the run does not wait for a tool approval: answer its questions instead")
	ErrDecisionCount     = failure.Unprocessable("decision_count_mismatch", "send one decision per pending tool call, or a single decision for all of them")
	// ErrExpired: an approval's time ran out. Nothing changed; the next
	// message on the thread resolves the expired calls as rejected.
	ErrExpired = failure.Conflict("approval_expired", "the tool approval expired; the call will not run — send a new message to continue")
)

// Match pairs n pending calls with decisions: one decision each, or a
// single decision for all of them.
func Match(decisions []Decision, n int) ([]Decision, error) {
	switch {
	case len(decisions) == n:
		return decisions, nil
	case len(decisions) == 1:
		out := make([]Decision, n)
		for i := range out {
			out[i] = decisions[0]
		}
		return out, nil
	}
	return nil, ErrDecisionCount.With(map[string]any{"pending": n, "decisions": len(decisions)})
}

// RejectedText is what the model reads for a rejected call.
func RejectedText(name, message string) string {
	s := fmt.Sprintf("The user rejected the tool call %s; it did not run. Do not retry it unless the user asks for it.", name)
	if message != "" {
		s += " The user said: " + message
	}
	return s
}

// ExpiredText is what the model reads for a call whose approval expired.
func ExpiredText(name string, at time.Time) string {
	return fmt.Sprintf("The approval of the tool call %s expired at %s without a decision; it did not run. Ask the user before trying it again.",
		name, at.UTC().Format(time.RFC3339))
}

// BlockedText is what the model reads for a call of a blocked tool.
func BlockedText(name string) string {
	return fmt.Sprintf("Error: the tool %s is blocked by this agent's tool policy; it did not run.", name)
}
