package agentstep

import (
	"context"

	"github.com/yuxi-serverless/yuxi/shared/budget"
	"github.com/yuxi-serverless/yuxi/shared/compaction"
	"github.com/yuxi-serverless/yuxi/shared/llm"
	"github.com/yuxi-serverless/yuxi/shared/run"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// Summaries stores context summaries (shared/compaction).
type Summaries interface {
	Latest(ctx context.Context, conversationID int64) (*compaction.Summary, error)
	ForStep(ctx context.Context, runID string, stepNo int) (*compaction.Summary, error)
	Save(ctx context.Context, x compaction.Summary) (compaction.Summary, error)
}

// compressionEvent is the chunk of a yuxi.context_compression event.
type compressionEvent struct {
	RequestID    string `json:"request_id"`
	ThreadID     string `json:"thread_id"`
	Status       string `json:"status"` // context_compression
	Phase        string `json:"phase"`  // started | completed | failed
	Level        string `json:"level,omitempty"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after,omitempty"`
	Trimmed      int    `json:"trimmed,omitempty"`
	Error        string `json:"error,omitempty"`
}

func (s *step) compressionEvent(ctx context.Context, ev compressionEvent) {
	ev.RequestID, ev.ThreadID, ev.Status = s.r.RequestID, s.r.ThreadID, "context_compression"
	if _, err := s.h.stream.Append(ctx, s.r.ID, s.r.ThreadID, runstream.EventCustom,
		runstream.Custom[compressionEvent]{Name: "yuxi.context_compression", Chunk: ev}); err != nil {
		s.h.log.Warn("append context_compression event", "run", s.r.ID, "error", err)
	}
}

// withSummary builds the model's messages from entries, the summary (if
// any) appended to the system prompt.
func withSummary(systemPrompt, summary string, entries []run.Entry) []llm.Message {
	if summary != "" {
		systemPrompt += "\n\n<conversation_summary>\nThe earlier part of this conversation, summarised:\n" + summary + "\n</conversation_summary>"
	}
	return buildMessages(systemPrompt, entries)
}

// after returns the entries after the one with message id upto (all of them
// when it is not in the transcript).
func after(entries []run.Entry, upto int64) ([]run.Entry, bool) {
	for i, e := range entries {
		if e.MessageID == upto {
			return entries[i+1:], true
		}
	}
	return entries, false
}

// contextMessages is the model's effective context for this step: the
// transcript after the thread's latest summary, then — over the
// threshold — the L1 view, and when that is still too large a new summary
// (L2, stored once per step). Stored messages never change.
func (s *step) contextMessages(ctx context.Context, model llm.ChatModel, modelID, sys string) ([]llm.Message, error) {
	r, entries := s.r, s.claim.Transcript
	cfg := r.Payload.Context.Summary
	if s.h.cfg.Summaries == nil || cfg.ThresholdK <= 0 {
		return buildMessages(sys, entries), nil
	}
	latest, err := s.h.cfg.Summaries.Latest(ctx, r.ConversationID)
	if err != nil {
		return nil, err
	}
	summary, effective := "", entries
	if latest != nil {
		if rest, ok := after(entries, latest.UptoMessageID); ok {
			summary, effective = latest.Content, rest
		}
	}
	msgs := withSummary(sys, summary, effective)
	threshold := compaction.Threshold(cfg)
	before := compaction.Estimate(msgs)
	if before <= threshold {
		return msgs, nil
	}
	s.compressionEvent(ctx, compressionEvent{Phase: "started", TokensBefore: before})
	// The newest entry (the turn the model answers to) stays whole.
	recent := 0
	if len(effective) > 0 {
		recent = len(buildMessages("", effective[len(effective)-1:]))
	}
	l1, trimmed := compaction.Trim(msgs, cfg.ToolResultTokenLimit, recent)
	l1Tokens := compaction.Estimate(l1)
	keep := cfg.KeepMessages
	if float64(l1Tokens) <= float64(threshold)*cfg.L2TriggerRatio || len(effective) <= keep {
		s.compressionEvent(ctx, compressionEvent{Phase: "completed", Level: "l1", TokensBefore: before, TokensAfter: l1Tokens, Trimmed: trimmed})
		return l1, nil
	}
	saved, err := s.h.cfg.Summaries.ForStep(ctx, r.ID, s.in.StepNo)
	if err != nil {
		return nil, err
	}
	if saved == nil {
		older := effective[:len(effective)-keep]
		in, _ := compaction.Trim(withSummary("", summary, older), cfg.ToolResultTokenLimit, 0)
		if summary != "" {
			in = append([]llm.Message{{Role: llm.RoleUser, Content: "Summary so far:\n" + summary}}, in...)
		}
		// The summary is a model call like the turn's: admitted by the
		// budgets, charged, and counted in the step's usage.
		call, settle, maxOut := s.budgetCall(budget.CallSummary), false, int64(0)
		estimate := requestEstimate(llm.Request{Messages: append([]llm.Message{{Role: llm.RoleSystem, Content: cfg.Prompt}}, in...)})
		if s.h.cfg.Budgets != nil {
			ref, ok, err := s.admit(ctx, call, estimate)
			if err != nil {
				return nil, err
			}
			if ref != nil {
				// Nothing left: the turn's own admission ends the run.
				s.compressionEvent(ctx, compressionEvent{Phase: "failed", Level: "l2", TokensBefore: before, Error: ref.Error()})
				return l1, nil
			}
			if settle = ok; settle {
				maxOut = s.h.cfg.Budgets.MaxOutput()
			}
		}
		text, usage, err := compaction.Summarise(ctx, model, modelID, cfg, in, maxOut)
		s.summaryCalled, s.summaryUsage = err == nil || usage.Reported, usage
		if settle {
			s.settle(ctx, call, charged(estimate, maxOut, llm.Response{Content: text, Usage: usage}))
		}
		if err != nil {
			// The run goes on with the L1 view; the next step tries again.
			s.compressionEvent(ctx, compressionEvent{Phase: "failed", Level: "l2", TokensBefore: before, Error: err.Error()})
			return l1, nil
		}
		final := withSummary(sys, text, effective[len(effective)-keep:])
		x, err := s.h.cfg.Summaries.Save(ctx, compaction.Summary{ConversationID: r.ConversationID, RunID: r.ID, StepNo: s.in.StepNo,
			UptoMessageID: older[len(older)-1].MessageID, Content: text, TokensBefore: before, TokensAfter: compaction.Estimate(final)})
		if err != nil {
			return nil, err
		}
		saved = &x
	}
	rest, _ := after(entries, saved.UptoMessageID)
	out, trimmed := compaction.Trim(withSummary(sys, saved.Content, rest), cfg.ToolResultTokenLimit, recent)
	s.compressionEvent(ctx, compressionEvent{Phase: "completed", Level: "l2", TokensBefore: before, TokensAfter: compaction.Estimate(out), Trimmed: trimmed})
	return out, nil
}
