package agentstep

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
)

// Steers reads the steer requests queued on a thread (*queue.Service).
type Steers interface {
	PendingSteers(ctx context.Context, uid, agentSlug, threadID string) ([]run.Steer, error)
}

// steerNote introduces a steer of the parent's thread to a sub-agent.
const steerNote = "While you work, the user sent this to the agent that delegated this task to you (it will act on it once you finish; take it into account if it concerns your task):\n\n"

// childSteers are the steers queued on a sub-agent run's parent thread that
// the child has not been shown yet, as they are shown (in the order they
// were sent). The step's commit stores them in the child's transcript ahead
// of its answer, so each reaches the child once and keeps its place; the
// parent takes them itself when its run reaches its boundary. A retried
// step reads them again (nothing was stored), so a redelivery neither loses
// nor repeats one.
func (s *step) childSteers(ctx context.Context) ([]run.Steer, error) {
	r := s.r
	if s.h.cfg.Steers == nil || r.RunType != run.TypeSubagent || r.CreatedByRunID == nil {
		return nil, nil
	}
	parent, err := s.h.runs.Get(ctx, *r.CreatedByRunID)
	if err != nil {
		return nil, err
	}
	pending, err := s.h.cfg.Steers.PendingSteers(ctx, parent.UID, parent.AgentSlug, parent.ThreadID)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	shown := map[string]bool{}
	for _, e := range s.claim.Transcript {
		if e.SteerRequestID != "" {
			shown[e.SteerRequestID] = true
		}
	}
	var out []run.Steer
	for _, p := range pending {
		if !shown[p.RequestID] {
			out = append(out, run.Steer{RequestID: p.RequestID, Content: steerNote + p.Content})
		}
	}
	return out, nil
}

// steerMessages are steers as the model's user messages.
func steerMessages(steers []run.Steer) []llm.Message {
	out := make([]llm.Message, 0, len(steers))
	for _, st := range steers {
		out = append(out, llm.Message{Role: "user", Content: st.Content})
	}
	return out
}
