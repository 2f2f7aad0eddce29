// Package toolinvoke is the handler of the tool-invoke function: it runs
// exactly one tool call per invocation, records its result, and — when it is
// the last call of its step to finish — readies the next step (or ends the
// run as interrupted when a call waits for the user). The fan-in is a counter
// decremented in the same transaction as the result, so exactly one call
// readies the next step however the calls interleave.
//
// Delivery is at-least-once: a call already recorded is not run again. A call
// whose tool ran but whose result was not recorded (crash) runs again; the
// tool call id is the idempotency key tools with side effects use.
//
// Imported by: functions/tool-invoke (main), infra/local, tests.
// May import: events, shared/*.
package toolinvoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/sandboxtool"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Tools finds registered tools.
type Tools interface {
	Get(name string) (tool.Tool, bool)
}

// Stream is the run event stream.
type Stream interface {
	Append(ctx context.Context, runID, threadID, event string, payload any) (string, error)
}

// RunTools finds the tools of a run's manifest that are not in the
// registry (MCP tools): false when name is not one of them.
type RunTools interface {
	Resolve(ctx context.Context, runID, name string) (tool.Tool, bool, error)
}

// CallLookup is a RunTools whose read rides along the statement that loads
// the call (*mcp.Toolset's Lookup; see run.Joined): one round trip for the
// call, its run and the MCP tool with its server's current row. resolve,
// called once that statement was read, answers as RunTools.Resolve.
type CallLookup interface {
	Lookup() (sql string, dest []any, resolve func(name string) (tool.Tool, bool, error))
}

// SkillTools reports whether a run's skills depend on a tool (the run may
// execute it even when the agent's own tool selection leaves it out; the
// model only saw it after activating the skill).
type SkillTools interface {
	Needs(ctx context.Context, runID, name string) (bool, error)
}

// Offloader keeps a tool result too large for the model's context and says
// where (sandboxtool.LargeResults): a sandbox path or an object key.
type Offloader interface {
	Offload(ctx context.Context, c tool.Call, output string) (string, error)
}

// notOffloaded are the tools whose results are never offloaded (as the
// original): their output is already bounded, or re-reading a file's
// offloaded copy would only loop.
var notOffloaded = map[string]bool{"read_file": true, "ls": true, "glob": true, "grep": true, "write_file": true, "edit_file": true}

// Config tunes the handler.
type Config struct {
	// Offload, when set, takes results estimated above LargeResultTokens
	// (default 20000; 4 characters a token) out of the model's context:
	// the model gets the place and a preview. nil: results are cut at MaxOutput.
	Offload           Offloader
	LargeResultTokens int
	Skills            SkillTools    // nil: no skills
	RunTools          RunTools      // nil: registry tools only
	Timeout           time.Duration // per tool call (default 5 min)
	MaxOutput         int           // bytes of output kept (default 256 KiB)
	Crash             func(point string)
}

// Handler handles io.yuxi.tool.call.requested.v1.
type Handler struct {
	runs   *run.Store
	tools  Tools
	stream Stream
	cfg    Config
	log    *slog.Logger
	lookup CallLookup // cfg.RunTools, when it is one
}

// New returns the handler.
func New(runs *run.Store, tools Tools, stream Stream, cfg Config, log *slog.Logger) *Handler {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 256 << 10
	}
	if cfg.LargeResultTokens <= 0 {
		cfg.LargeResultTokens = 20000
	}
	if log == nil {
		log = slog.Default()
	}
	lookup, _ := cfg.RunTools.(CallLookup)
	return &Handler{runs: runs, tools: tools, stream: stream, cfg: cfg, log: log, lookup: lookup}
}

// Register adds the handler to a function router.
func (h *Handler) Register(r *faas.Router) { faas.On(r, h.Handle) }

func (h *Handler) crash(point string) {
	if h.cfg.Crash != nil {
		h.cfg.Crash(point)
	}
}

// Handle runs one tool call.
func (h *Handler) Handle(ctx context.Context, in events.ToolCallRequested) error {
	// The call, its run and (RunTools) its MCP tool with the server's current
	// row: one statement.
	var (
		joined  run.Joined
		resolve func(string) (tool.Tool, bool, error)
	)
	if h.lookup != nil {
		joined.SQL, joined.Dest, resolve = h.lookup.Lookup()
	}
	tc, r, err := h.runs.GetToolCallAndRunWith(ctx, in.RunID, in.ToolCallID, joined)
	if errors.Is(err, run.ErrToolCallNotFound) {
		return faas.Permanent(fmt.Errorf("unknown tool call %s of run %s", in.ToolCallID, in.RunID))
	}
	if err != nil {
		return err
	}
	if tc.Status != run.ToolPending {
		return nil // already recorded
	}
	if run.IsTerminal(r.Status) {
		return nil // the run ended (e.g. cancelled): nothing waits for this call
	}
	var res tool.Result
	if r.Status == run.StatusCancelRequested {
		return h.record(ctx, r, tc, run.ToolResult{Status: run.ToolCancelled}, tool.Result{})
	}
	// The tool-started event is appended while the tool runs and its result
	// is recorded; run appends tool-finished only after it (StreamAfter).
	started := make(chan struct{})
	go func() {
		defer close(started)
		h.toolEvent(ctx, r, tc, runstream.ToolEventData{Event: runstream.ToolStarted})
	}()
	tctx, span := telemetry.StartToolCall(ctx, tc.Name, tc.ToolCallID, telemetry.Who{UserID: r.UID, ThreadID: r.ThreadID, RunID: r.ID, Agent: r.AgentSlug})
	res, err = h.invoke(tctx, r, tc, resolve)
	span.End(err)
	if err != nil {
		<-started
		return err // infrastructure failure: retried
	}
	if res.Deferred {
		<-started
		return nil // recorded later (e.g. when a sub-agent run finishes)
	}
	if res, err = h.offload(ctx, r, tc, res); err != nil {
		<-started
		return err // the store is unreachable: retried
	}
	out := run.ToolResult{Status: run.ToolSuccess, Output: truncate(res.Output, h.cfg.MaxOutput)}
	switch {
	case res.Interrupt != nil:
		payload, _ := json.Marshal(res.Interrupt.Payload)
		out = run.ToolResult{Status: run.ToolInterrupted, Output: string(payload), InterruptType: res.Interrupt.Kind, InterruptMessage: res.Interrupt.Message}
	case res.IsError:
		out.Status, out.Error = run.ToolError, truncate(res.Output, 4000)
	}
	out.StreamAfter = started
	return h.record(ctx, r, tc, out, res)
}

// offload replaces a large successful result by its place and a preview.
func (h *Handler) offload(ctx context.Context, r run.Run, tc run.ToolCall, res tool.Result) (tool.Result, error) {
	if h.cfg.Offload == nil || res.IsError || res.Interrupt != nil || notOffloaded[tc.Name] {
		return res, nil
	}
	tokens := (utf8.RuneCountInString(res.Output) + 3) / 4
	if tokens <= h.cfg.LargeResultTokens {
		return res, nil
	}
	where, err := h.cfg.Offload.Offload(ctx, tool.Call{RunID: r.ID, ToolCallID: tc.ToolCallID, StepNo: tc.StepNo, ThreadID: r.ThreadID,
		UID: r.UID, AgentSlug: r.AgentSlug}, res.Output)
	if err != nil {
		return res, err
	}
	res.Output = sandboxtool.LargeResultPreview(tc.ToolCallID, where, res.Output, tokens, min(4*h.cfg.LargeResultTokens, 8000))
	return res, nil
}

// invoke runs the call; resolve, when set, resolves the names of the run's
// MCP tools from what the call's load read (else RunTools.Resolve reads it).
func (h *Handler) invoke(ctx context.Context, r run.Run, tc run.ToolCall, resolve func(string) (tool.Tool, bool, error)) (tool.Result, error) {
	t, ok := h.tools.Get(tc.Name)
	fromManifest := false
	if !ok && h.cfg.RunTools != nil {
		var err error
		if resolve != nil {
			t, ok, err = resolve(tc.Name)
		} else {
			t, ok, err = h.cfg.RunTools.Resolve(ctx, r.ID, tc.Name)
		}
		if err != nil {
			return tool.Result{}, err
		}
		fromManifest = ok
	}
	if !ok {
		return tool.Errorf(fmt.Sprintf("unknown tool %q", tc.Name)), nil
	}
	// Authorization at the point of effect: the run's frozen tool selection
	// (a manifest tool was fixed from the run's context at its first step).
	if spec := t.Spec(); !fromManifest && !spec.Base && len(r.Payload.Context.Tools) > 0 && !slices.Contains(r.Payload.Context.Tools, tc.Name) {
		needed := false
		if h.cfg.Skills != nil {
			var err error
			if needed, err = h.cfg.Skills.Needs(ctx, r.ID, tc.Name); err != nil {
				return tool.Result{}, err
			}
		}
		if !needed {
			return tool.Errorf(fmt.Sprintf("tool %q is not enabled for this agent", tc.Name)), nil
		}
	}
	if res, gated := gate(r, tc); gated {
		return res, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	res, err := t.Invoke(ctx, tool.Call{RunID: r.ID, ToolCallID: tc.ToolCallID, StepNo: tc.StepNo, ThreadID: r.ThreadID,
		UID: r.UID, AgentSlug: r.AgentSlug, Arguments: tc.Input})
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.Errorf(fmt.Sprintf("tool %q timed out after %s", tc.Name, h.cfg.Timeout)), nil
	}
	return res, err
}

// gate applies tool approval (shared/approval) before a call runs: a
// blocked tool is refused; a call that needs approval and has none yet
// interrupts the run instead of running (its output stores the approval
// request). An approved call (moved to its resume run) runs.
func gate(r run.Run, tc run.ToolCall) (tool.Result, bool) {
	switch approval.Decide(r.Payload.ToolApprovalMode, r.Payload.Context.ToolPolicies, tc.Name) {
	case approval.Block:
		return tool.Result{Output: approval.BlockedText(tc.Name), IsError: true}, true
	case approval.Confirm:
		if approval.Approved(tc.Output) {
			return tool.Result{}, false
		}
		ttl := time.Duration(r.Payload.Context.ToolApprovalTTLSeconds) * time.Second
		p := approval.NewPending(tc.Name, tc.ToolCallID, tc.Input, time.Now(), ttl)
		var payload map[string]any
		b, _ := json.Marshal(p)
		_ = json.Unmarshal(b, &payload)
		return tool.Result{Interrupt: &tool.Interrupt{Kind: approval.InterruptKind, Message: approval.Message(tc.Name), Payload: payload}}, true
	}
	return tool.Result{}, false
}

func (h *Handler) record(ctx context.Context, r run.Run, tc run.ToolCall, out run.ToolResult, res tool.Result) error {
	out.RunID, out.ThreadID, out.ToolCallID, out.StepNo = r.ID, r.ThreadID, tc.ToolCallID, tc.StepNo
	if out.Status != run.ToolCancelled {
		data := runstream.ToolEventData{Event: runstream.ToolFinished}
		switch out.Status {
		case run.ToolError:
			data.Error = &out.Error
		case run.ToolInterrupted:
			data.Interrupt = &out.InterruptType
		default:
			data.Output = &out.Output
		}
		// run appends it once the result is recorded, ahead of the closing
		// events when this call ends the run.
		out.Stream = []runstream.OnceEvent{{Type: runstream.EventCustom, Payload: toolEventPayload(r, tc, data)}}
	}
	h.crash("tool.before_complete")
	if _, err := h.runs.CompleteToolCall(ctx, out); err != nil {
		return err
	}
	h.crash("tool.after_complete")
	return nil
}

func (h *Handler) toolEvent(ctx context.Context, r run.Run, tc run.ToolCall, data runstream.ToolEventData) {
	if _, err := h.stream.Append(context.WithoutCancel(ctx), r.ID, r.ThreadID, runstream.EventCustom,
		toolEventPayload(r, tc, data)); err != nil {
		h.log.Warn("append tool event", "run", r.ID, "error", err)
	}
}

// toolEventPayload is the yuxi.stream_event of tool call tc; data names the
// event kind and its outcome.
func toolEventPayload(r run.Run, tc run.ToolCall, data runstream.ToolEventData) runstream.Custom[runstream.ToolEventChunk] {
	data.ToolCallID, data.ToolName = tc.ToolCallID, tc.Name
	return runstream.Custom[runstream.ToolEventChunk]{Name: runstream.CustomStreamEvent, Chunk: runstream.ToolEventChunk{
		RequestID: r.RequestID, ThreadID: r.ThreadID, Status: runstream.ChunkStreamEvent,
		Event: runstream.ToolEvent{Method: "tools", Data: data, ThreadID: r.ThreadID}}}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n…[output truncated]"
}
