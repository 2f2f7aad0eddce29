package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/runstream"
)

// StreamAppender appends events to a run's stream, keyed events at most once.
type StreamAppender interface {
	AppendOnceBatch(ctx context.Context, runID, threadID string, evs []runstream.OnceEvent) (int, error)
}

// The run's closing events — interrupt (cancelled, or interrupted with the
// questions asked), error (failed), then exactly one end — are written by
// this file only, from two kinds of paths:
//
//   - right after a terminal transition commits (Finish, RequestCancel,
//     CompleteToolCall, RecoverStuck, StreamStep): best effort, for latency;
//     a failure is logged;
//   - on run.finished (CloseStream, called by the dispatcher): the guarantee,
//     since run.finished is committed with the transition and redelivered
//     until CloseStream succeeds.
//
// The closing events are keyed by their event type (at most one interrupt,
// error and end per run), so writing them again adds nothing.

// ErrNotTerminal: the run has not ended (its stream cannot be closed).
var ErrNotTerminal = errors.New("run is not terminal")

// CloseStream makes sure the stream of terminal run id carries its closing
// events; the dispatcher calls it on run.finished. It returns the run.
// ErrNotFound for an unknown run, ErrNotTerminal for a run still going.
func (s *Store) CloseStream(ctx context.Context, id string) (Run, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return Run{}, err
	}
	if !IsTerminal(r.Status) {
		return r, fmt.Errorf("close stream of run %s (%s): %w", id, r.Status, ErrNotTerminal)
	}
	return r, s.closeStream(ctx, r)
}

// closed is the best-effort write after a terminal commit.
func (s *Store) closed(ctx context.Context, r Run, prelude ...runstream.OnceEvent) {
	if err := s.closeStream(ctx, r, prelude...); err != nil {
		s.log.Warn("append end events", "run", r.ID, "error", err)
	}
}

// appendBestEffort writes non-closing events after a commit; failures are
// logged (the events are progress hints, not facts).
func (s *Store) appendBestEffort(ctx context.Context, r Run, evs []runstream.OnceEvent) {
	if s.stream == nil || len(evs) == 0 {
		return
	}
	if _, err := s.stream.AppendOnceBatch(context.WithoutCancel(ctx), r.ID, r.ThreadID, evs); err != nil {
		s.log.Warn("append stream events", "run", r.ID, "error", err)
	}
}

// closeStream writes the closing events of terminal run r after prelude
// (unkeyed events, e.g. the last message marker) in one round trip.
func (s *Store) closeStream(ctx context.Context, r Run, prelude ...runstream.OnceEvent) error {
	if s.stream == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	errType, errMsg := "", ""
	if r.ErrorType != nil {
		errType = *r.ErrorType
	}
	if r.ErrorMessage != nil {
		errMsg = *r.ErrorMessage
	}
	evs := append([]runstream.OnceEvent(nil), prelude...)
	switch r.Status {
	case StatusCancelled:
		evs = append(evs, runstream.OnceEvent{OnceKey: runstream.EventInterrupt, Type: runstream.EventInterrupt, Payload: runstream.Interrupt[runstream.CancelChunk]{
			Reason: "cancelled", Chunk: runstream.CancelChunk{RequestID: r.RequestID, ThreadID: r.ThreadID, Status: runstream.ChunkCancelled, Message: errMsg}}})
	case StatusInterrupted:
		calls, err := s.InterruptedCalls(ctx, r.ID)
		if err != nil {
			return err
		}
		questions := []json.RawMessage{}
		toolCallIDs := []string{}
		for _, c := range calls {
			toolCallIDs = append(toolCallIDs, c.ToolCallID)
			var stored struct {
				Questions []json.RawMessage `json:"questions"`
			}
			if c.Output != nil && json.Unmarshal([]byte(*c.Output), &stored) == nil {
				questions = append(questions, stored.Questions...)
			}
		}
		source, approvals, reason := "ask_user_question", approvalChunk(calls), errType
		if errType == approval.InterruptKind {
			source, reason = approval.Source, approval.InterruptReason
		}
		evs = append(evs, runstream.OnceEvent{OnceKey: runstream.EventInterrupt, Type: runstream.EventInterrupt, Payload: runstream.Interrupt[runstream.QuestionsChunk]{
			Reason: reason, Chunk: runstream.QuestionsChunk{RequestID: r.RequestID, ThreadID: r.ThreadID, Status: errType,
				Questions: questions, ToolCallIDs: toolCallIDs, Message: errMsg, Source: source, Approval: approvals}}})
	case StatusFailed:
		evs = append(evs, runstream.OnceEvent{OnceKey: runstream.EventError, Type: runstream.EventError, Payload: runstream.Error{
			Chunk: runstream.ErrorChunk{RequestID: r.RequestID, ThreadID: r.ThreadID, Status: runstream.ChunkError,
				ErrorType: errType, ErrorMessage: errMsg}}})
	}
	evs = append(evs, runstream.OnceEvent{OnceKey: runstream.EventEnd, Type: runstream.EventEnd, Payload: runstream.End{Status: r.Status, RequestID: r.RequestID}})
	_, err := s.stream.AppendOnceBatch(ctx, r.ID, r.ThreadID, evs)
	return err
}

// StreamStep writes what follows a committed step to the run's stream: the
// message_final marker of the turn and, when the step ended the run, the
// closing events — one round trip, best effort (see CloseStream for the
// guarantee). agent-step calls it after CommitStep.
func (s *Store) StreamStep(ctx context.Context, c StepCommit, res StepResult) {
	r := res.Run
	final := runstream.OnceEvent{Type: runstream.EventCustom, Payload: runstream.Custom[runstream.MessageFinal]{
		Name: runstream.CustomMessageFinal, Chunk: runstream.MessageFinal{RequestID: r.RequestID, ThreadID: r.ThreadID,
			Status: runstream.ChunkMessageFinal, MessageID: c.StreamMessageID, DBMessageID: res.MessageID, StepNo: c.StepNo,
			ToolCallCount: len(c.ToolCalls)}}}
	if res.Outcome == OutcomeTools {
		s.appendBestEffort(ctx, r, []runstream.OnceEvent{final})
		return
	}
	s.closed(ctx, r, final)
}
