package run

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/events"
	"github.com/yuxi-serverless/yuxi/shared/outbox"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// TypeSubagent is the run type of a sub-agent (child) run.
const TypeSubagent = "subagent"

// NewChild describes a sub-agent run started by a parent run's tool call.
type NewChild struct {
	ID             string
	ThreadID       string // the child thread (its conversation exists)
	ConversationID int64
	AgentSlug      string // the sub-agent
	UID            string
	ParentRunID    string
	Source         string
	Channel        string
	Input          string // the task description: the child's user message
	Payload        Payload
}

// CreateChildTx writes a child run inside tx: its input message (entering the
// child thread's transcript), the pending run (run_type subagent,
// created_by_run_id = the parent) and its first step event. A child thread
// with an active run refuses a second one with ErrThreadBusy.
func (s *Store) CreateChildTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, n NewChild) (Run, error) {
	requestID := "sub_" + n.ID
	var msgID int64
	if err := tx.QueryRow(ctx, `INSERT INTO messages (conversation_id, role, content, request_id, delivery_status, run_id, transcript_seq)
		VALUES ($1, 'user', $2, $3, 'dispatched', $4, nextval('transcript_seq')) RETURNING id`,
		n.ConversationID, n.Input, requestID, n.ID).Scan(&msgID); err != nil {
		return Run{}, fmt.Errorf("write input of child run %s: %w", n.ID, err)
	}
	parent := n.ParentRunID
	r, err := s.CreateTx(ctx, tx, NewRun{ID: n.ID, ThreadID: n.ThreadID, ConversationID: n.ConversationID, AgentSlug: n.AgentSlug,
		UID: n.UID, RequestID: requestID, Source: n.Source, Channel: n.Channel, RunType: TypeSubagent, CreatedByRunID: &parent,
		InputMessageID: msgID, Payload: n.Payload})
	if err != nil {
		return Run{}, err
	}
	return r, emit(outbox.Pending{
		Payload:   events.StepReady{RunID: r.ID, ThreadID: r.ThreadID, StepNo: 1},
		DedupeKey: fmt.Sprintf("step:%s:%d", r.ID, 1),
	})
}

// ActiveChildren returns the non-terminal sub-agent runs of parent.
func (s *Store) ActiveChildren(ctx context.Context, parentID string) ([]Run, error) {
	return activeChildren(ctx, s.pool, parentID)
}

func activeChildren(ctx context.Context, db postgres.DB, parentID string) ([]Run, error) {
	rows, err := db.Query(ctx, `SELECT `+runCols+` FROM agent_runs WHERE created_by_run_id = $1 AND run_type = 'subagent'
		AND status IN ('pending', 'running', 'cancel_requested') ORDER BY created_at, id`, parentID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// cancelChildrenTx cascades a parent's cancellation to its active children
// inside tx: a pending child ends cancelled at once (returned, so that its
// stream is closed after the commit), a running one becomes cancel_requested
// and stops at its next step boundary. Sub-agents have no children of their
// own, so one level is all there is.
func cancelChildrenTx(ctx context.Context, tx pgx.Tx, emit outbox.Emit, parentID string) ([]Run, error) {
	children, err := activeChildren(ctx, tx, parentID)
	if err != nil {
		return nil, fmt.Errorf("children of run %s: %w", parentID, err)
	}
	var ended []Run
	for _, c := range children {
		switch c.Status {
		case StatusPending:
			fr, changed, err := finishTx(ctx, tx, emit, c.ID, Finish{Status: StatusCancelled, ErrorType: "cancelled",
				ErrorMessage: "the parent run was cancelled"})
			if err != nil {
				return nil, err
			}
			if changed {
				ended = append(ended, fr)
			}
		case StatusRunning:
			if _, err := tx.Exec(ctx, `UPDATE agent_runs SET status = 'cancel_requested', updated_at = clock_timestamp()
				WHERE id = $1 AND status = 'running'`, c.ID); err != nil {
				return nil, err
			}
		}
	}
	return ended, nil
}
