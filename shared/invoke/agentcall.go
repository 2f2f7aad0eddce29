package invoke

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/yuxi-serverless/yuxi/shared/access"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// AgentCallInput is POST /api/agent-invocation/agent-call/runs.
type AgentCallInput struct {
	AgentSlug        string         `json:"agent_slug"`
	Messages         []ChatMessage  `json:"messages"`
	Stream           bool           `json:"stream"`
	AgentCallMeta    map[string]any `json:"agent_call_meta"`
	ThreadID         string         `json:"thread_id"`
	RequestID        string         `json:"request_id"`
	ModelSpec        string         `json:"model_spec"`
	ToolApprovalMode string         `json:"tool_approval_mode"`
	AsyncMode        bool           `json:"async_mode"`
	QueuePolicy      string         `json:"queue_policy"`
}

// CallResult is the agent-call answer, the original's OpenAI-ish shape:
// choices[0].messages (plural), finish_reason from the run's status, usage
// only when every model call reported it.
type CallResult struct {
	RunID     *string       `json:"run_id"`
	AgentSlug string        `json:"agent_slug"`
	ThreadID  string        `json:"thread_id"`
	Status    string        `json:"status"`
	RequestID string        `json:"request_id"`
	ResultURL *string       `json:"result_url"`
	Output    string        `json:"output"`
	Choices   []CallChoice  `json:"choices"`
	Usage     *Usage        `json:"usage"`
	Error     *ResultError  `json:"error,omitempty"`
	Intake    *queue.Intake `json:"-"`
}

// CallChoice is choices[i] of a CallResult.
type CallChoice struct {
	Index        int           `json:"index"`
	Messages     []CallMessage `json:"messages"`
	FinishReason *string       `json:"finish_reason"`
}

// CallMessage is an assistant message of a CallChoice.
type CallMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Usage is OpenAI's token count.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ResultError is a failed run's error.
type ResultError struct {
	Type    *string `json:"type"`
	Message *string `json:"message"`
}

// AgentCall takes an agent call in. Async calls answer at once (queued or
// dispatched, policy enqueue by default); sync calls must use policy
// reject (422 otherwise), answer a busy thread's rejection as it is
// (Intake set, as the original) and otherwise wait for the run's end.
func (s *Service) AgentCall(ctx context.Context, sub access.Subject, in AgentCallInput) (CallResult, error) {
	slug := strings.TrimSpace(in.AgentSlug)
	if slug == "" {
		return CallResult{}, failure.Unprocessable("missing_agent_slug", "agent_slug is required")
	}
	if in.Stream {
		return CallResult{}, failure.Unprocessable("stream_not_supported", "agent-call does not stream; use /v1/chat/completions with stream:true")
	}
	i, err := lastUser(in.Messages)
	if err != nil {
		return CallResult{}, err
	}
	msg, err := ParseContent(in.Messages[i].Content)
	if err != nil {
		return CallResult{}, err
	}
	requestID, err := normRequestID(in.RequestID)
	if err != nil {
		return CallResult{}, err
	}
	if _, ok := in.AgentCallMeta["context"]; ok {
		return CallResult{}, failure.Unprocessable("invalid_agent_call_meta",
			"agent_call_meta.context may not override the agent's context; use model_spec to choose a model")
	}
	if err := validApproval(in.ToolApprovalMode); err != nil {
		return CallResult{}, err
	}
	policy := strings.TrimSpace(in.QueuePolicy)
	if policy == "" {
		policy = queue.PolicyReject
		if in.AsyncMode {
			policy = queue.PolicyEnqueue
		}
	}
	if !in.AsyncMode && policy != queue.PolicyReject {
		return CallResult{}, failure.Unprocessable("sync_requires_reject", "a synchronous agent-call supports only queue_policy reject")
	}
	if err := s.checkAgent(ctx, sub, slug); err != nil {
		return CallResult{}, err
	}
	threadID := strings.TrimSpace(in.ThreadID)
	if threadID == "" {
		threadID = HashID("invocation_", sub.UID+":"+slug+":"+requestID)
	}
	if _, err := s.d.Threads.Ensure(ctx, sub.UID, threadID, slug, "Agent Call Run", SourceAgentCall); err != nil {
		return CallResult{}, err
	}
	out, err := s.d.Queue.Submit(ctx, queue.Submission{Subject: sub, Query: msg.Text, ImageContent: msg.Image, AgentSlug: slug,
		ThreadID: threadID, RequestID: requestID, ModelSpec: in.ModelSpec, QueuePolicy: policy,
		Source: SourceAgentCall, Channel: ChannelAPI, ToolApprovalMode: in.ToolApprovalMode})
	if err != nil {
		return CallResult{}, err
	}
	if in.AsyncMode {
		if out.RunID == nil {
			return CallResult{Intake: &out}, nil
		}
		status := out.Status
		if status == queue.RequestDispatched {
			status = "pending"
		}
		return callResult(*out.RunID, slug, threadID, status, out.RequestID, "", nil, nil), nil
	}
	if out.RunID == nil { // rejected: the thread is busy
		return CallResult{Intake: &out}, nil
	}
	r, err := s.Wait(ctx, *out.RunID)
	if err != nil {
		return CallResult{}, err
	}
	return s.runResult(ctx, r)
}

// AgentCallResult is POST …/agent-call/runs/result: uid's run in the
// agent-call shape; a given agent_slug must be the run's (409 otherwise).
func (s *Service) AgentCallResult(ctx context.Context, uid, runID, agentSlug string) (CallResult, error) {
	runID = strings.TrimSpace(runID)
	if runID == "" {
		return CallResult{}, failure.Unprocessable("missing_run_id", "run_id is required")
	}
	r, err := s.d.Runs.GetForUser(ctx, uid, runID)
	if err != nil {
		return CallResult{}, err
	}
	if a := strings.TrimSpace(agentSlug); a != "" && a != r.AgentSlug {
		return CallResult{}, failure.Conflict("agent_slug_mismatch", "run_id does not belong to agent_slug")
	}
	return s.runResult(ctx, r)
}

func (s *Service) runResult(ctx context.Context, r run.Run) (CallResult, error) {
	output, err := s.d.Runs.Output(ctx, r)
	if err != nil {
		return CallResult{}, err
	}
	var rerr *ResultError
	if r.ErrorType != nil || r.ErrorMessage != nil {
		rerr = &ResultError{Type: r.ErrorType, Message: r.ErrorMessage}
	}
	return callResult(r.ID, r.AgentSlug, r.ThreadID, r.Status, r.RequestID, output, CompleteUsage(r.TokenUsage), rerr), nil
}

func callResult(runID, slug, threadID, status, requestID, output string, usage *Usage, rerr *ResultError) CallResult {
	url := "/api/agent/runs/" + runID + "/result"
	return CallResult{RunID: &runID, AgentSlug: slug, ThreadID: threadID, Status: status, RequestID: requestID,
		ResultURL: &url, Output: output, Usage: usage, Error: rerr,
		Choices: []CallChoice{{Index: 0, Messages: []CallMessage{{Role: "assistant", Content: output}}, FinishReason: finishReason(status)}}}
}

func finishReason(status string) *string {
	var f string
	switch status {
	case run.StatusCompleted:
		f = "stop"
	case run.StatusFailed, run.StatusCancelled, run.StatusInterrupted:
		f = status
	default:
		return nil
	}
	return &f
}

// CompleteUsage reads a run's token_usage as OpenAI usage, nil unless
// every model call reported its usage (token_usage.complete).
func CompleteUsage(raw json.RawMessage) *Usage {
	var t run.TokenUsage
	if len(raw) == 0 || json.Unmarshal(raw, &t) != nil || !t.Complete || t.ModelCallCount == 0 {
		return nil
	}
	return &Usage{PromptTokens: int(t.Total.InputTokens), CompletionTokens: int(t.Total.OutputTokens), TotalTokens: int(t.Total.TotalTokens)}
}
