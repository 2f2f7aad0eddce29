// Package thread stores conversations (threads) and renders their history.
// A thread belongs to one user; another user's thread is indistinguishable
// from a missing one (404).
//
// Imported by: functions/intake, shared/queue, shared/userfiles. May import: shared/postgres,
// shared/failure, shared/approval, shared/sandbox (project folders' paths), pgx.
package thread

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yuxi-serverless/yuxi/shared/approval"
	"github.com/yuxi-serverless/yuxi/shared/failure"
	"github.com/yuxi-serverless/yuxi/shared/postgres"
)

// ErrNotFound is returned for unknown, deleted and other users' threads.
var ErrNotFound = failure.NotFound("thread_not_found", "thread not found")

// errRequestIDConflict: the request_id already created a thread for another agent.
var errRequestIDConflict = failure.Conflict("request_id_conflict", "request_id was used for another thread")

// Thread is a conversation as the API shows it (ThreadResponse).
type Thread struct {
	ID             string          `json:"id"`
	UID            string          `json:"uid"`
	AgentID        string          `json:"agent_id"`
	Title          string          `json:"title"`
	IsPinned       bool            `json:"is_pinned"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Metadata       json.RawMessage `json:"metadata"`
	ThreadStatus   string          `json:"thread_status"`
	ProjectID      *string         `json:"project_id"`
	WorkdirPath    *string         `json:"workdir_path"`
	ConversationID int64           `json:"-"`
}

// Store reads and writes threads.
type Store struct {
	pool    *pgxpool.Pool
	folders ProjectFolders // nil: projects get no working folder (no provisioner)
}

// NewStore returns a thread store.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

const threadCols = `c.id, c.thread_id, c.uid, c.agent_id, c.title, c.is_pinned, c.created_at, c.updated_at, c.extra_metadata,
	CASE
		WHEN lr.status IN ('pending', 'running', 'cancel_requested') THEN 'loading'
		WHEN lr.id IS NOT NULL AND lr.id IS DISTINCT FROM c.last_viewed_run_id THEN 'ready'
		ELSE 'done'
	END, c.project_id, (SELECT p.workdir_path FROM projects p WHERE p.id = c.project_id)`

const latestRunJoin = `LEFT JOIN LATERAL (
		SELECT r.id, r.status FROM agent_runs r WHERE r.conversation_thread_id = c.thread_id AND r.run_type IN ('chat', 'resume')
		ORDER BY r.created_at DESC LIMIT 1) lr ON true`

func scanThread(row pgx.Row) (Thread, error) {
	var t Thread
	err := row.Scan(&t.ConversationID, &t.ID, &t.UID, &t.AgentID, &t.Title, &t.IsPinned, &t.CreatedAt, &t.UpdatedAt, &t.Metadata, &t.ThreadStatus, &t.ProjectID, &t.WorkdirPath)
	return t, err
}

// CreateInput is POST /api/chat/thread.
type CreateInput struct {
	RequestID *string         `json:"request_id"`
	Title     *string         `json:"title"`
	AgentID   string          `json:"agent_id"`
	Metadata  json.RawMessage `json:"metadata"`
	// ProjectID puts the thread in one of the caller's projects.
	ProjectID *string `json:"project_id"`
}

// Create makes a thread for uid. It is idempotent on (uid, request_id). The
// caller has checked that the agent is visible to uid.
func (s *Store) Create(ctx context.Context, uid string, in CreateInput) (Thread, error) {
	if strings.TrimSpace(in.AgentID) == "" {
		return Thread{}, failure.Unprocessable("invalid_thread", "agent_id is required")
	}
	if in.RequestID != nil && (len(*in.RequestID) == 0 || len(*in.RequestID) > 64) {
		return Thread{}, failure.Unprocessable("invalid_request_id", "request_id must be 1 to 64 characters")
	}
	title := "New conversation"
	if in.Title != nil {
		title = strings.TrimSpace(*in.Title)
		if len(title) > 500 {
			return Thread{}, failure.Unprocessable("invalid_thread", "title is longer than 500 characters")
		}
	}
	meta := in.Metadata
	if len(meta) == 0 || string(meta) == "null" {
		meta = json.RawMessage("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(meta, &obj); err != nil {
		return Thread{}, failure.Unprocessable("invalid_thread", "metadata must be an object")
	}
	if in.ProjectID != nil && *in.ProjectID != "" {
		if _, err := s.Project(ctx, uid, *in.ProjectID); err != nil {
			return Thread{}, err
		}
	} else {
		in.ProjectID = nil
	}
	if in.RequestID != nil {
		if t, err := s.byRequest(ctx, uid, *in.RequestID); err == nil {
			if t.AgentID != in.AgentID {
				return Thread{}, errRequestIDConflict
			}
			return t, nil
		}
	}
	id := newThreadID()
	_, err := s.pool.Exec(ctx, `INSERT INTO conversations (thread_id, creation_request_id, uid, agent_id, title, extra_metadata, project_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, in.RequestID, uid, in.AgentID, title, meta, in.ProjectID)
	if postgres.IsUniqueViolation(err, "conversations_uid_creation_request_id_key") && in.RequestID != nil {
		// A concurrent create with this request_id won: answer its thread as a
		// replay, or a conflict when it was for another agent.
		t, err := s.byRequest(ctx, uid, *in.RequestID)
		if err == nil && t.AgentID != in.AgentID {
			return Thread{}, errRequestIDConflict
		}
		return t, err
	}
	if err != nil {
		return Thread{}, fmt.Errorf("create thread: %w", err)
	}
	return s.Get(ctx, uid, id)
}

// Ensure returns uid's thread threadID, creating it for agentID when no
// thread has that id (the invocation entries derive thread ids from their
// callers, as the original). A thread of another user, or a deleted one, is
// ErrNotFound: an id never reaches across tenants. source is kept in the
// thread's metadata; agent_call and agent_evaluation threads are hidden from
// List, as the original hides them from the chat list.
func (s *Store) Ensure(ctx context.Context, uid, threadID, agentID, title, source string) (Thread, error) {
	if threadID == "" || len(threadID) > 64 {
		return Thread{}, failure.Unprocessable("invalid_thread_id", "thread_id must be 1 to 64 characters")
	}
	meta, _ := json.Marshal(map[string]string{"source": source})
	if _, err := s.pool.Exec(ctx, `INSERT INTO conversations (thread_id, uid, agent_id, title, extra_metadata)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (thread_id) DO NOTHING`, threadID, uid, agentID, title, meta); err != nil {
		return Thread{}, fmt.Errorf("ensure thread: %w", err)
	}
	return s.Get(ctx, uid, threadID)
}

func (s *Store) byRequest(ctx context.Context, uid, requestID string) (Thread, error) {
	t, err := scanThread(s.pool.QueryRow(ctx, `SELECT `+threadCols+` FROM conversations c `+latestRunJoin+`
		WHERE c.uid = $1 AND c.creation_request_id = $2 AND c.status <> 'deleted'`, uid, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, ErrNotFound
	}
	return t, err
}

func newThreadID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Get returns uid's thread.
func (s *Store) Get(ctx context.Context, uid, threadID string) (Thread, error) {
	t, err := scanThread(s.pool.QueryRow(ctx, `SELECT `+threadCols+` FROM conversations c `+latestRunJoin+`
		WHERE c.thread_id = $1 AND c.uid = $2 AND c.status <> 'deleted'`, threadID, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, ErrNotFound
	}
	if err != nil {
		return Thread{}, fmt.Errorf("load thread: %w", err)
	}
	return t, nil
}

// List returns uid's threads, newest first (pinned first).
func (s *Store) List(ctx context.Context, uid, agentID string, limit, offset int) ([]Thread, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	if offset < 0 {
		offset = 0
	}
	rows, err := s.pool.Query(ctx, `SELECT `+threadCols+` FROM conversations c `+latestRunJoin+`
		WHERE c.uid = $1 AND c.status <> 'deleted' AND ($2 = '' OR c.agent_id = $2)
			AND coalesce(c.extra_metadata->>'source', '') NOT IN ('agent_call', 'agent_evaluation', 'subagent')
		ORDER BY c.is_pinned DESC, c.updated_at DESC, c.id DESC LIMIT $3 OFFSET $4`, uid, agentID, limit, offset)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Thread{}
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// UpdateInput is PUT /api/chat/thread/{id}.
type UpdateInput struct {
	Title    *string `json:"title"`
	IsPinned *bool   `json:"is_pinned"`
	// ToolApprovalMode overrides the agent's tool approval mode for the
	// thread's next runs (metadata.tool_approval_mode); "" removes the override.
	ToolApprovalMode *string `json:"tool_approval_mode"`
}

// Update changes title, pin and tool approval override of uid's thread.
func (s *Store) Update(ctx context.Context, uid, threadID string, in UpdateInput) (Thread, error) {
	if in.Title != nil && len(strings.TrimSpace(*in.Title)) > 500 {
		return Thread{}, failure.Unprocessable("invalid_thread", "title is longer than 500 characters")
	}
	if in.ToolApprovalMode != nil {
		if err := approval.CheckMode(*in.ToolApprovalMode); err != nil {
			return Thread{}, err
		}
	}
	var title *string
	if in.Title != nil {
		t := strings.TrimSpace(*in.Title)
		title = &t
	}
	tag, err := s.pool.Exec(ctx, `UPDATE conversations SET title = coalesce($3, title), is_pinned = coalesce($4, is_pinned),
		extra_metadata = CASE WHEN $5::text IS NULL THEN extra_metadata
			WHEN $5 = '' THEN coalesce(extra_metadata, '{}'::jsonb) - 'tool_approval_mode'
			ELSE coalesce(extra_metadata, '{}'::jsonb) || jsonb_build_object('tool_approval_mode', $5::text) END,
		updated_at = now()
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted'`, threadID, uid, title, in.IsPinned, in.ToolApprovalMode)
	if err != nil {
		return Thread{}, err
	}
	if tag.RowsAffected() == 0 {
		return Thread{}, ErrNotFound
	}
	return s.Get(ctx, uid, threadID)
}

// Delete soft-deletes uid's thread.
func (s *Store) Delete(ctx context.Context, uid, threadID string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE conversations SET status = 'deleted', updated_at = now()
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted'`, threadID, uid)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Locked is a thread row held FOR UPDATE inside a transaction: the thread-level
// serialization point of the request queue.
type Locked struct {
	ConversationID int64
	ThreadID       string
	UID            string
	AgentID        string
}

// Lock takes the row lock of uid's thread in tx.
func Lock(ctx context.Context, tx pgx.Tx, uid, threadID string) (Locked, error) {
	var l Locked
	err := tx.QueryRow(ctx, `SELECT id, thread_id, uid, agent_id FROM conversations
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted' FOR UPDATE`, threadID, uid).Scan(&l.ConversationID, &l.ThreadID, &l.UID, &l.AgentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, ErrNotFound
	}
	return l, err
}

// Viewed is the answer of POST /api/chat/thread/{id}/viewed.
type Viewed struct {
	ThreadID        string  `json:"thread_id"`
	ThreadStatus    string  `json:"thread_status"`
	LastViewedRunID *string `json:"last_viewed_run_id"`
}

// MarkViewed records that uid has seen the latest finished top-level run of
// their thread, which clears the sidebar's unread state ("ready" becomes
// "done"). A run still going is not marked: the thread stays "loading" and
// becomes "ready" when it ends.
func (s *Store) MarkViewed(ctx context.Context, uid, threadID string) (Viewed, error) {
	var v Viewed
	err := s.pool.QueryRow(ctx, `UPDATE conversations c SET last_viewed_run_id = coalesce((
			SELECT r.id FROM agent_runs r WHERE r.conversation_thread_id = c.thread_id AND r.run_type IN ('chat', 'resume')
				AND r.status NOT IN ('pending', 'running', 'cancel_requested')
				AND NOT EXISTS (SELECT 1 FROM agent_runs n WHERE n.conversation_thread_id = c.thread_id AND n.run_type IN ('chat', 'resume')
					AND n.created_at > r.created_at)
			ORDER BY r.created_at DESC LIMIT 1), c.last_viewed_run_id)
		WHERE c.thread_id = $1 AND c.uid = $2 AND c.status <> 'deleted'
		RETURNING c.thread_id, c.last_viewed_run_id`, threadID, uid).Scan(&v.ThreadID, &v.LastViewedRunID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Viewed{}, ErrNotFound
	}
	if err != nil {
		return Viewed{}, fmt.Errorf("mark thread viewed: %w", err)
	}
	t, err := s.Get(ctx, uid, threadID)
	if err != nil {
		return Viewed{}, err
	}
	v.ThreadStatus = t.ThreadStatus
	return v, nil
}
