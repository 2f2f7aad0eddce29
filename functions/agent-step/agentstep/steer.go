package agentstep

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Steers reads the steer requests queued on a thread (*queue.Service).
type Steers interface {
	PendingSteers(ctx context.Context, uid, agentSlug, threadID string) ([]string, error)
}

// steerNote introduces a steer of the parent's thread to a sub-agent.
const steerNote = "While you work, the user sent this to the agent that delegated this task to you (it will act on it once you finish; take it into account if it concerns your task):\n\n"

// childSteers are the steers queued on a sub-agent run's parent thread, as
// user messages for the child's model call, in the order they were sent.
// They are not stored in the child's transcript: each model call of the
// child shows the steers still queued (the parent takes them when its run
// reaches its boundary).
func (s *step) childSteers(ctx context.Context) ([]llm.Message, error) {
	r := s.r
	if s.h.cfg.Steers == nil || r.RunType != run.TypeSubagent || r.CreatedByRunID == nil {
		return nil, nil
	}
	parent, err := s.h.runs.Get(ctx, *r.CreatedByRunID)
	if err != nil {
		return nil, err
	}
	texts, err := s.h.cfg.Steers.PendingSteers(ctx, parent.UID, parent.AgentSlug, parent.ThreadID)
	if err != nil {
		return nil, err
	}
	out := make([]llm.Message, 0, len(texts))
	for _, t := range texts {
		out = append(out, llm.Message{Role: "user", Content: steerNote + t})
	}
	return out, nil
}
