package invoke

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/queue"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/thread"
)

// AgentState is the state of a thread's agent as GET
// /api/chat/thread/{id}/state shows it: the queue, the latest top-level
// run (with its interrupt, when it waits for an answer) and, on request,
// the visible messages. The original reads a LangGraph checkpoint; here the
// run, queue and message tables are that state. Artifacts are the files
// the agent presented (present_artifacts), sandbox paths oldest first as
// the original's state `artifacts`; ArtifactItems says which run and call
// presented each.
type AgentState struct {
	Queue         queue.Snapshot       `json:"queue"`
	LatestRun     *run.View            `json:"latest_run"`
	Messages      []thread.HistoryItem `json:"messages,omitempty"`
	Artifacts     []string             `json:"artifacts"`
	ArtifactItems []thread.Artifact    `json:"artifact_items"`
	// TokenUsage: the latest model call, the latest run and the thread's
	// total, each in the schema_version 2 form (as the original's state).
	TokenUsage run.ThreadUsage `json:"token_usage"`
}

// ThreadStateView is the answer of the state route.
type ThreadStateView struct {
	ThreadID     string     `json:"thread_id"`
	AgentID      string     `json:"agent_id"`
	ThreadStatus string     `json:"thread_status"`
	AgentState   AgentState `json:"agent_state"`
}

// ThreadState returns the state of uid's thread (thread.ErrNotFound for
// another user's).
func (s *Service) ThreadState(ctx context.Context, uid, threadID string, includeMessages bool) (ThreadStateView, error) {
	t, err := s.d.Threads.Get(ctx, uid, threadID)
	if err != nil {
		return ThreadStateView{}, err
	}
	snap, err := s.d.Queue.Snapshot(ctx, uid, t.AgentID, threadID)
	if err != nil {
		return ThreadStateView{}, err
	}
	out := ThreadStateView{ThreadID: t.ID, AgentID: t.AgentID, ThreadStatus: t.ThreadStatus, AgentState: AgentState{Queue: snap, Artifacts: []string{}}}
	if out.AgentState.ArtifactItems, err = s.d.Threads.Artifacts(ctx, uid, threadID); err != nil {
		return ThreadStateView{}, err
	}
	for _, a := range out.AgentState.ArtifactItems {
		out.AgentState.Artifacts = append(out.AgentState.Artifacts, a.Path)
	}
	latest, err := s.d.Runs.LatestForThread(ctx, uid, t.AgentID, threadID)
	if err != nil {
		return ThreadStateView{}, err
	}
	if latest != nil {
		v := latest.View()
		out.AgentState.LatestRun = &v
	}
	if out.AgentState.TokenUsage, err = s.d.Runs.UsageForThread(ctx, uid, threadID, latest); err != nil {
		return ThreadStateView{}, err
	}
	if includeMessages {
		if out.AgentState.Messages, err = s.d.Threads.History(ctx, uid, threadID); err != nil {
			return ThreadStateView{}, err
		}
	}
	return out, nil
}
