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

// EvalInput is POST /api/agent-invocation/eval/runs: one evaluation sample.
type EvalInput struct {
	Query      string `json:"query"`
	AgentSlug  string `json:"agent_slug"`
	ThreadID   string `json:"thread_id"`
	Evaluation struct {
		DatasetName    *string `json:"dataset_name"`
		DatasetItemID  *string `json:"dataset_item_id"`
		ExperimentName *string `json:"experiment_name"`
	} `json:"evaluation"`
	Meta struct {
		RequestID string `json:"request_id"`
	} `json:"meta"`
	ImageContent     *string `json:"image_content"`
	ModelSpec        string  `json:"model_spec"`
	ToolApprovalMode string  `json:"tool_approval_mode"`
	// IncludeTrajectorySummary (default true) adds the trajectory summary.
	IncludeTrajectorySummary *bool `json:"include_trajectory_summary"`
}

// EvalResult is the run's result (contracts §3.6) plus its trajectory.
type EvalResult struct {
	Status            string             `json:"status"`
	Output            string             `json:"output"`
	AgentSlug         string             `json:"agent_slug"`
	ThreadID          string             `json:"thread_id"`
	ConversationID    int64              `json:"conversation_id"`
	AgentRunID        *string            `json:"agent_run_id"`
	RequestID         string             `json:"request_id"`
	FinalMessageID    *int64             `json:"final_message_id"`
	LangfuseTraceID   *string            `json:"langfuse_trace_id"`
	TokenUsage        json.RawMessage    `json:"token_usage"`
	Error             *ResultError       `json:"error,omitempty"`
	TrajectorySummary *TrajectorySummary `json:"trajectory_summary,omitempty"`
}

// TrajectorySummary is what an evaluation reads about how the agent got
// its answer: tool calls per tool (from the tool_calls rows, which outlive
// the event stream), steps, tokens and duration.
type TrajectorySummary struct {
	SchemaVersion  int            `json:"schema_version"`
	Source         string         `json:"source"` // "tool_calls"
	ToolCallCount  int            `json:"tool_call_count"`
	ToolErrorCount int            `json:"tool_error_count"`
	InterruptCount int            `json:"interrupt_count"`
	Tools          []run.ToolStat `json:"tools"`
	StepCount      int            `json:"step_count"`
	Usage          *Usage         `json:"usage"`
	DurationMS     *int64         `json:"duration_ms"`
}

// EvalRun runs one evaluation sample and blocks until its run ends
// (source agent_evaluation, policy reject, a thread of its own unless
// thread_id is given). The sample's evaluation context is kept, as the
// original, in its input message's agent_invocation_meta.evaluation.
func (s *Service) EvalRun(ctx context.Context, sub access.Subject, in EvalInput) (EvalResult, error) {
	slug := strings.TrimSpace(in.AgentSlug)
	if strings.TrimSpace(in.Query) == "" && in.ImageContent == nil {
		return EvalResult{}, failure.Unprocessable("empty_query", "query must not be empty")
	}
	requestID, err := normRequestID(in.Meta.RequestID)
	if err != nil {
		return EvalResult{}, err
	}
	if err := validApproval(in.ToolApprovalMode); err != nil {
		return EvalResult{}, err
	}
	if err := s.checkAgent(ctx, sub, slug); err != nil {
		return EvalResult{}, err
	}
	threadID := strings.TrimSpace(in.ThreadID)
	if threadID == "" {
		threadID = HashID("evaluation_", sub.UID+":"+slug+":"+requestID)
	}
	if _, err := s.d.Threads.Ensure(ctx, sub.UID, threadID, slug, "Agent Evaluation Run", SourceEvaluation); err != nil {
		return EvalResult{}, err
	}
	out, err := s.d.Queue.Submit(ctx, queue.Submission{Subject: sub, Query: in.Query, ImageContent: in.ImageContent, AgentSlug: slug,
		ThreadID: threadID, RequestID: requestID, ModelSpec: in.ModelSpec, QueuePolicy: queue.PolicyReject,
		Source: SourceEvaluation, Channel: ChannelAPI, ToolApprovalMode: in.ToolApprovalMode,
		InvocationMeta: map[string]any{"evaluation": in.Evaluation}})
	if err != nil {
		return EvalResult{}, err
	}
	if out.RunID == nil {
		t, m := "thread_busy", "the thread has an active run or queued requests"
		return EvalResult{Status: out.Status, AgentSlug: slug, ThreadID: threadID, RequestID: out.RequestID,
			TokenUsage: json.RawMessage(`{"available":false}`), Error: &ResultError{Type: &t, Message: &m}}, nil
	}
	r, err := s.Wait(ctx, *out.RunID)
	if err != nil {
		return EvalResult{}, err
	}
	res, err := s.evalResult(ctx, r)
	if err != nil || (in.IncludeTrajectorySummary != nil && !*in.IncludeTrajectorySummary) {
		return res, err
	}
	sum, err := s.Trajectory(ctx, r)
	res.TrajectorySummary = &sum
	return res, err
}

func (s *Service) evalResult(ctx context.Context, r run.Run) (EvalResult, error) {
	output, err := s.d.Runs.Output(ctx, r)
	if err != nil {
		return EvalResult{}, err
	}
	usage := r.TokenUsage
	if len(usage) == 0 {
		usage = json.RawMessage(`{"available":false}`)
	}
	id := r.ID
	res := EvalResult{Status: r.Status, Output: output, AgentSlug: r.AgentSlug, ThreadID: r.ThreadID, ConversationID: r.ConversationID,
		AgentRunID: &id, RequestID: r.RequestID, FinalMessageID: r.OutputMessageID, TokenUsage: usage}
	if r.ErrorType != nil || r.ErrorMessage != nil {
		res.Error = &ResultError{Type: r.ErrorType, Message: r.ErrorMessage}
	}
	return res, nil
}

// Trajectory summarizes run r.
func (s *Service) Trajectory(ctx context.Context, r run.Run) (TrajectorySummary, error) {
	stats, err := s.d.Runs.ToolStats(ctx, r.ID)
	if err != nil {
		return TrajectorySummary{}, err
	}
	sum := TrajectorySummary{SchemaVersion: 1, Source: "tool_calls", Tools: stats, StepCount: r.StepCount, Usage: CompleteUsage(r.TokenUsage)}
	for _, t := range stats {
		sum.ToolCallCount += t.CallCount
		sum.ToolErrorCount += t.ErrorCount
		sum.InterruptCount += t.Interrupted
	}
	if r.StartedAt != nil && r.FinishedAt != nil {
		d := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
		sum.DurationMS = &d
	}
	return sum, nil
}
