// Package agentstep is the handler of the agent-step function: one model turn
// of a run per invocation. It claims the step's lease, loads the thread's
// transcript (the checkpoint) from Postgres, streams the model's answer to the
// run's event stream, and commits the turn — the assistant message, its tool
// calls and the events they cause — in one transaction. Tool calls fan out to
// tool-invoke; a turn without tool calls completes the run.
//
// Delivery is at-least-once: a duplicate event finds the step committed or its
// lease held and does nothing. A crashed invocation is retried from the last
// committed step; its partial stream is discarded by clients via a retry
// marker (attempt-scoped message ids).
//
// Imported by: functions/agent-step (main), infra/local, tests.
// May import: events, shared/*.
package agentstep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/faas"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
	"github.com/yuxi-serverless/yuxi/shared/subagent"
	"github.com/yuxi-serverless/yuxi/shared/telemetry"
	"github.com/yuxi-serverless/yuxi/shared/tool"
)

// Models resolves a model spec ("provider:model") to a chat model.
type Models interface {
	ChatModel(spec string) (llm.ChatModel, string, error)
}

// Stream is the run event stream.
type Stream interface {
	Append(ctx context.Context, runID, threadID, event string, payload any) (string, error)
	NewBatcher(runID, threadID string, flushEvery time.Duration, maxChars int) *runstream.Batcher
	WatchCancel(ctx context.Context, runID string) (<-chan struct{}, func())
}

// Tools lists the tools a run may offer the model.
type Tools interface {
	Visible(configured []string) []tool.Spec
}

// RunTools fixes a run's executable tools at its first step (the run's
// tool manifest: builtin and knowledge tools the context allows plus the
// tools of its MCP servers) and returns them for every step.
type RunTools interface {
	StepSpecs(ctx context.Context, runID string, mcps []string, builtin []tool.Spec) ([]tool.Spec, error)
}

// SkillGate is the run-time side of skills (*skill.Gate): the tool and MCP
// dependencies a run's skills need to be executable (fixed at its first
// step), and, per turn, the skills section of the system prompt and the
// filter that hides a skill's tools until the agent activated it.
type SkillGate interface {
	Executable(ctx context.Context, r run.Run) (tools, mcps []string, err error)
	Visible(ctx context.Context, r run.Run, transcript []run.Entry, system string, specs []tool.Spec) (string, []tool.Spec, error)
}

// Config tunes the handler.
type Config struct {
	// Skills, when set, gates the tools of the run's skills (nil: no skills).
	Skills SkillGate
	// RunTools, when set, adds the MCP layer and the run manifest; nil: the
	// registry's tools only.
	RunTools   RunTools
	WorkerID   string        // identifies this process in leases
	Lease      time.Duration // step lease (default 60s); renewed every Lease/3 while the model streams
	FlushEvery time.Duration // token batching interval (default 100ms)
	// Crash, when set, is called at named points; tests use it to kill the
	// process at exact moments (see the README, "Durability").
	Crash        func(point string)
	RetryBackoff time.Duration // first model retry delay (default 500ms)
	// Summaries, when set, compresses long contexts (L1 trimming, L2
	// summaries; see compaction.go); nil sends the whole transcript.
	Summaries Summaries
	// Guard checks the model's output (nil: off): streamed tokens against
	// the keyword list, the final answer against keywords and, when on, LLM
	// moderation.
	Guard OutputGuard
	// Budgets, when set, checks the user's and the agent's token budgets
	// before each model call (budget.go); nil: no budgets.
	Budgets Budgets
	// Workspace, when set, reads the user's workspace prompt files
	// (agents/AGENTS.md, USER.md, MEMORY.md) into the system prompt
	// (workspace.go); nil (no provisioner): skipped.
	Workspace WorkspaceFiles
	// Steers, when set, shows a running sub-agent the steer requests queued
	// on its parent's thread (steer.go).
	Steers Steers
}

// OutputGuard is the content guard on model output (contentguard.Guard).
type OutputGuard interface {
	// Scanner returns a per-stream keyword scan (nil: nothing to scan).
	Scanner(ctx context.Context) (func(chunk string) bool, error)
	CheckOutput(ctx context.Context, text string) error
}

// guardRefusal replaces an answer the content guard refused (the
// original's refusal text).
const guardRefusal = "内容包含敏感信息，已被内容安全策略拦截"

// errGuardBlocked ends a model stream whose tokens hit a keyword.
var errGuardBlocked = errors.New("content guard: keyword in streamed output")

// Handler handles io.yuxi.agent.step.ready.v1.
type Handler struct {
	runs   *run.Store
	models Models
	tools  Tools
	stream Stream
	cfg    Config
	log    *slog.Logger
	// workspace reads the prompt files (nil without cfg.Workspace).
	workspace *WorkspacePrompt
}

// New returns the handler.
func New(runs *run.Store, models Models, tools Tools, stream Stream, cfg Config, log *slog.Logger) *Handler {
	if cfg.Lease <= 0 {
		cfg.Lease = 60 * time.Second
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 100 * time.Millisecond
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 500 * time.Millisecond
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "agent-step-" + nonce()
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{runs: runs, models: models, tools: tools, stream: stream, cfg: cfg, log: log}
	if cfg.Workspace != nil {
		h.workspace = NewWorkspacePrompt(cfg.Workspace, log)
	}
	return h
}

// Register adds the handler to a function router.
func (h *Handler) Register(r *faas.Router) { faas.On(r, h.Handle) }

func (h *Handler) crash(point string) {
	if h.cfg.Crash != nil {
		h.cfg.Crash(point)
	}
}

func nonce() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Handle runs one step.
func (h *Handler) Handle(ctx context.Context, in events.StepReady) error {
	claim, err := h.runs.Claim(ctx, in.RunID, in.StepNo, h.cfg.WorkerID, h.cfg.Lease)
	if errors.Is(err, run.ErrNotFound) {
		return faas.Permanent(fmt.Errorf("step for unknown run %s", in.RunID))
	}
	if err != nil {
		return err
	}
	if claim.Outcome != run.Claimed {
		h.log.Debug("step not claimed", "run", in.RunID, "step", in.StepNo, "outcome", claim.Outcome.String())
		return nil
	}
	h.crash("step.claimed")
	telemetry.Annotate(ctx, telemetry.Who{UserID: claim.Run.UID, ThreadID: claim.Run.ThreadID, RunID: claim.Run.ID, Agent: claim.Run.AgentSlug})
	s := &step{h: h, in: in, claim: claim, r: claim.Run, owner: run.Owner{Worker: h.cfg.WorkerID, Attempt: claim.Attempt}}
	return s.execute(ctx)
}

type step struct {
	h     *Handler
	in    events.StepReady
	claim run.Claim
	r     run.Run
	owner run.Owner
	// steers are shown to the model this step and stored with its answer.
	steers []run.Steer
	// summaryCalled: this step made a context summary call, which used
	// summaryUsage (counted in the step's usage).
	summaryCalled bool
	summaryUsage  llm.Usage
}

func (s *step) execute(ctx context.Context) error {
	h, r := s.h, s.r
	if r.Status == run.StatusCancelRequested {
		return s.finish(ctx, run.Finish{Status: run.StatusCancelled, ErrorType: "cancelled", ErrorMessage: "the run was cancelled"})
	}
	if s.claim.Steer {
		// A steer request waits: end this run at the model boundary as completed;
		// the dispatcher then runs the steer request on the same transcript.
		return s.finish(ctx, run.Finish{Status: run.StatusCompleted})
	}
	if max := r.Payload.Context.MaxExecutionSteps; max > 0 && s.in.StepNo > max {
		return s.finish(ctx, run.Finish{Status: run.StatusFailed, ErrorType: "max_execution_steps_exceeded",
			ErrorMessage: fmt.Sprintf("the run reached max_execution_steps (%d)", max)})
	}
	model, modelID, err := h.models.ChatModel(r.Payload.ModelSpec)
	if err != nil {
		return s.finish(ctx, run.Finish{Status: run.StatusFailed, ErrorType: "model_not_available", ErrorMessage: err.Error()})
	}
	specs, system, err := s.tools(ctx)
	if err != nil {
		return fmt.Errorf("tools of run %s: %w", r.ID, err) // retried
	}
	specs = subagent.FilterSpecs(r, specs)
	msgs, err := s.contextMessages(ctx, model, modelID, system)
	if err != nil {
		return s.release(ctx, fmt.Errorf("context of run %s: %w", r.ID, err)) // retried
	}
	steers, err := s.childSteers(ctx)
	if err != nil {
		return s.release(ctx, fmt.Errorf("steers for sub-agent run %s: %w", r.ID, err)) // retried
	}
	s.steers = steers
	msgs = append(msgs, steerMessages(steers)...)
	req := llm.Request{Model: modelID, Messages: msgs, Tools: toolSpecs(specs)}

	started := time.Now()
	out, err := s.streamModel(ctx, model, req)
	if err != nil {
		return err
	}
	if out.leaseLost {
		return nil // another attempt owns the run now
	}
	if out.refused != nil {
		return s.finish(ctx, run.Finish{Status: run.StatusFailed, ErrorType: budget.ErrorType, ErrorMessage: out.refused.Error()})
	}
	if out.failed != nil {
		return s.finish(ctx, run.Finish{Status: run.StatusFailed, ErrorType: "model_error", ErrorMessage: out.failed.Error()})
	}
	if !out.blocked && !out.cancelled && h.cfg.Guard != nil && out.resp.Content != "" {
		// The final answer as a whole: keywords, and LLM moderation when on.
		if err := h.cfg.Guard.CheckOutput(ctx, out.resp.Content); err != nil {
			if fe, ok := failure.As(err); !ok || !strings.HasPrefix(fe.Code, "content_guard_") {
				return fmt.Errorf("content guard: %w", err) // retried
			}
			out.blocked = true
		}
	}
	if out.blocked {
		// The stored message is the refusal, as the original replaces it.
		out.resp = llm.Response{Content: guardRefusal, Usage: out.resp.Usage}
	}
	return s.commit(ctx, started, out)
}

// tools returns what the model sees this turn and the system prompt: the
// registry's tools the agent allows, plus (RunTools) its MCP tools fixed in
// the run's manifest, plus (Skills) what its skills need, then filtered by
// skill activation.
func (s *step) tools(ctx context.Context) ([]tool.Spec, string, error) {
	h, c := s.h, s.r.Payload.Context
	own, mcps, system := c.Tools, c.MCPs, c.SystemPrompt+s.workspacePrompt(ctx)
	if h.cfg.Skills != nil {
		tools, more, err := h.cfg.Skills.Executable(ctx, s.r)
		if err != nil {
			return nil, "", err
		}
		if len(own) > 0 { // an explicit selection grows by the skills' tools; none means every tool already
			own = union(own, tools)
		}
		mcps = union(mcps, more)
	}
	specs := h.tools.Visible(own)
	var err error
	if h.cfg.RunTools != nil {
		if specs, err = h.cfg.RunTools.StepSpecs(ctx, s.r.ID, mcps, specs); err != nil {
			return nil, "", err
		}
	}
	if h.cfg.Skills != nil {
		if system, specs, err = h.cfg.Skills.Visible(ctx, s.r, s.claim.Transcript, system, specs); err != nil {
			return nil, "", err
		}
	}
	return specs, system, nil
}

func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// metadata is the run's first event, written once per run (keyed) ahead of
// step 1's first tokens.
func (s *step) metadata() *runstream.OnceEvent {
	if s.in.StepNo != 1 {
		return nil
	}
	r := s.r
	return &runstream.OnceEvent{OnceKey: runstream.EventMetadata, Type: runstream.EventMetadata, Payload: runstream.Metadata{
		RequestID: r.RequestID, AgentSlug: r.AgentSlug, UID: r.UID, Source: r.Source,
		RunType: r.RunType, CreatedByRunID: r.CreatedByRunID}}
}

// retryMarker tells clients that the step starts over: every message of the
// step (ids starting with discard_message_prefix) except current_message_id
// is to be discarded, including late deltas of an abandoned attempt.
func (s *step) retryMarker(ctx context.Context, currentMessageID, reason string) {
	r := s.r
	chunk := runstream.Retry{RequestID: r.RequestID, ThreadID: r.ThreadID, Status: runstream.ChunkRetry, StepNo: s.in.StepNo,
		Attempt: s.owner.Attempt, DiscardMessagePrefix: fmt.Sprintf("%s:%d:", r.ID, s.in.StepNo),
		CurrentMessageID: currentMessageID, Reason: reason}
	if _, err := s.h.stream.Append(ctx, r.ID, r.ThreadID, runstream.EventCustom,
		runstream.Custom[runstream.Retry]{Name: runstream.CustomRetry, Chunk: chunk}); err != nil {
		s.h.log.Warn("append retry marker", "run", r.ID, "error", err)
	}
}

type modelOutcome struct {
	resp            llm.Response
	streamMessageID string
	blocked         bool // the content guard refused the output
	cancelled       bool
	leaseLost       bool
	failed          error
	refused         *budget.Refusal // a token budget refused the call (a retry's too)
}

// streamModel runs the model turn with retries, streaming deltas to the run's
// stream, renewing the lease and watching for cancellation.
func (s *step) streamModel(ctx context.Context, model llm.ChatModel, req llm.Request) (modelOutcome, error) {
	h, r := s.h, s.r
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	var cancelled, leaseLost atomic.Bool
	cancelCh, stopWatch := h.stream.WatchCancel(streamCtx, r.ID)
	defer stopWatch()
	var parentCh <-chan struct{} // nil: never fires
	if r.RunType == run.TypeSubagent && r.CreatedByRunID != nil {
		// A cancelled parent has already cascaded cancel_requested to this
		// child (shared/run); its signal stops the child's stream as well.
		ch, stopParent := h.stream.WatchCancel(streamCtx, *r.CreatedByRunID)
		defer stopParent()
		parentCh = ch
	}
	go func() {
		select {
		case <-cancelCh:
			cancelled.Store(true)
			stop()
		case <-parentCh:
			cancelled.Store(true)
			stop()
		case <-streamCtx.Done():
		}
	}()
	go func() {
		t := time.NewTicker(h.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-streamCtx.Done():
				return
			case <-t.C:
				if err := h.runs.Renew(streamCtx, r.ID, s.owner.Worker, s.owner.Attempt, h.cfg.Lease); errors.Is(err, run.ErrLeaseLost) {
					leaseLost.Store(true)
					stop()
					return
				}
			}
		}
	}()

	retries := r.Payload.Context.ModelRetryTimes
	backoff := h.cfg.RetryBackoff
	var lastErr error
	for try := 0; ; try++ {
		// Each try is a model call of its own: admitted by the budgets
		// before it (a retry too) and charged after it.
		call := s.budgetCall(budget.CallTurn + try)
		settle, estimate := false, requestEstimate(req)
		req.MaxTokens = 0
		if h.cfg.Budgets != nil {
			ref, ok, err := s.admit(ctx, call, estimate)
			switch {
			case errors.Is(err, run.ErrLeaseLost):
				return modelOutcome{leaseLost: true}, nil
			case err != nil:
				return modelOutcome{}, s.release(ctx, err) // retried
			case ref != nil:
				return modelOutcome{refused: ref}, nil
			}
			if settle = ok; settle {
				req.MaxTokens = h.cfg.Budgets.MaxOutput() // the call's reservation covers this much answer
			}
		}
		msgID := fmt.Sprintf("%s:%d:%d:%s", r.ID, s.in.StepNo, s.owner.Attempt, nonce())
		switch {
		case try > 0:
			s.retryMarker(ctx, msgID, "model call failed: "+lastErr.Error())
		case s.claim.Retry:
			s.retryMarker(ctx, msgID, "step restarted after an interrupted attempt")
		}
		b := h.stream.NewBatcher(r.ID, r.ThreadID, h.cfg.FlushEvery, 512)
		if m := s.metadata(); m != nil {
			b.Lead(*m)
		}
		if r.RunType == run.TypeSubagent && r.CreatedByRunID != nil {
			b.Mirror(*r.CreatedByRunID) // the child's tokens in the parent's SSE, scoped by the child's thread
		}
		deltas := 0
		var scan func(string) bool
		if h.cfg.Guard != nil {
			var gerr error
			if scan, gerr = h.cfg.Guard.Scanner(ctx); gerr != nil {
				_ = b.Close(context.WithoutCancel(ctx))
				return modelOutcome{}, fmt.Errorf("content guard: %w", gerr) // retried
			}
		}
		resp, err := model.Stream(streamCtx, req, func(d llm.Delta) error {
			deltas++
			if deltas == 6 { // far enough in that batches have reached the stream
				h.crash("step.streaming")
			}
			// The scan keeps the automaton's state across deltas: a keyword
			// split over tokens is found when its last rune arrives, before
			// the delta carrying it is forwarded.
			if scan != nil && d.Content != "" && scan(d.Content) {
				return errGuardBlocked
			}
			return s.forward(streamCtx, b, msgID, d)
		})
		if settle {
			// Charged whatever follows: the provider spent the tokens.
			s.settle(ctx, call, charged(estimate, req.MaxTokens, resp))
		}
		if errors.Is(err, errGuardBlocked) {
			_ = b.Close(context.WithoutCancel(ctx))
			return modelOutcome{streamMessageID: msgID, blocked: true}, nil
		}
		if err == nil {
			// Buffered, not urgent: the Close below appends them with the
			// last tokens in one round trip (urgent was one per call).
			for i, tc := range resp.ToolCalls {
				_ = b.Add(ctx, toolCallChunk(r, msgID, i, tc))
			}
		}
		_ = b.Close(context.WithoutCancel(ctx))
		switch {
		case leaseLost.Load():
			return modelOutcome{leaseLost: true}, nil
		case cancelled.Load():
			resp.ToolCalls = nil // a cut-short turn's tool calls are incomplete
			return modelOutcome{resp: resp, streamMessageID: msgID, cancelled: true}, nil
		case ctx.Err() != nil:
			return modelOutcome{}, ctx.Err() // shutting down: retry elsewhere
		case err == nil:
			return modelOutcome{resp: resp, streamMessageID: msgID}, nil
		}
		if !llm.IsRetryable(err) || try >= retries {
			return modelOutcome{failed: err}, nil
		}
		h.log.Info("model call failed, retrying", "run", r.ID, "step", s.in.StepNo, "try", try+1, "error", err)
		lastErr = err
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-streamCtx.Done():
			t.Stop()
		}
		backoff *= 2
	}
}

// commit writes the turn and publishes what follows from it.
func (s *step) commit(ctx context.Context, started time.Time, out modelOutcome) error {
	h, r := s.h, s.r
	calls := toolCalls(out.resp.ToolCalls)
	u := run.Usage{InputTokens: out.resp.Usage.InputTokens, OutputTokens: out.resp.Usage.OutputTokens,
		TotalTokens: out.resp.Usage.TotalTokens, Reported: out.resp.Usage.Reported,
		CacheReadTokens: out.resp.Usage.CacheReadTokens, CacheReported: out.resp.Usage.CacheReported}
	stepUsage := run.AddUsage(nil, r.Payload.ModelSpec, u)
	tokenUsage := run.AddUsage(r.TokenUsage, r.Payload.ModelSpec, u)
	if s.summaryCalled {
		// The context summary's model call counts with the step's.
		v := usageOf(s.summaryUsage)
		stepUsage = run.AddUsage(stepUsage, r.Payload.ModelSpec, v)
		tokenUsage = run.AddUsage(tokenUsage, r.Payload.ModelSpec, v)
	}
	h.crash("step.before_commit")
	c := run.StepCommit{
		Run: r, StepNo: s.in.StepNo, Owner: s.owner, StartedAt: started,
		Content: out.resp.Content, Reasoning: out.resp.Reasoning, ToolCalls: calls,
		StreamMessageID: out.streamMessageID, ModelSpec: r.Payload.ModelSpec,
		StepUsage: stepUsage, TokenUsage: tokenUsage, Partial: out.cancelled,
		GuardBlocked:    out.blocked,
		UsedToolCallIDs: usedToolCallIDs(s.claim.Transcript),
		Steers:          s.steers,
	}
	res, err := h.runs.CommitStep(ctx, c)
	if errors.Is(err, run.ErrDuplicateStep) || errors.Is(err, run.ErrLeaseLost) {
		return nil
	}
	if err != nil {
		return s.release(ctx, err)
	}
	h.crash("step.after_commit")
	// The message_final marker, and the closing events when the step ended
	// the run, are written by run (best effort; run.finished guarantees them).
	h.runs.StreamStep(ctx, c, res)
	return nil
}

// usedToolCallIDs are the tool call ids of the thread's transcript: every
// call of the run is in it (each step's message enters it), and the ids of
// earlier runs only make renaming a little more likely.
func usedToolCallIDs(transcript []run.Entry) []string {
	var ids []string
	for _, e := range transcript {
		for _, tc := range e.ToolCalls {
			ids = append(ids, tc.ID)
		}
	}
	return ids
}

// toolCalls converts the model's calls; run gives each a run-unique id as it
// commits them.
func toolCalls(calls []llm.ToolCall) []run.NewToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]run.NewToolCall, 0, len(calls))
	for _, c := range calls {
		out = append(out, run.NewToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return out
}

// finish ends the run at this step boundary (as the lease holder); run
// writes the stream's closing events.
func (s *step) finish(ctx context.Context, f run.Finish) error {
	f.Owner = &s.owner
	if _, _, err := s.h.runs.Finish(ctx, s.r.ID, f); err != nil {
		return s.release(ctx, err)
	}
	return nil
}

// release gives the lease back after an infrastructure error so that the
// retried delivery can claim the step at once, and asks for that retry.
func (s *step) release(ctx context.Context, cause error) error {
	if err := s.h.runs.Release(context.WithoutCancel(ctx), s.r.ID, s.owner); err != nil {
		s.h.log.Warn("release lease", "run", s.r.ID, "error", err)
	}
	return cause
}
