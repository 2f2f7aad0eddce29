package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Artifact is a file the agent presented to the user with present_artifacts
// (the original's LangGraph state `artifacts`), kept in
// conversations.extra_metadata.artifacts[] in presentation order. A path
// presented again moves to the end with the later run and call.
type Artifact struct {
	Path        string `json:"path"` // sandbox path under /home/gem/user-data/outputs
	RunID       string `json:"run_id"`
	ToolCallID  string `json:"tool_call_id"`
	PresentedAt string `json:"presented_at"`
}

// RecordArtifacts adds paths presented by tool call toolCallID of run runID
// to uid's thread. Idempotent by tool call id: a redelivered call leaves the
// list as its first delivery did.
func (s *Store) RecordArtifacts(ctx context.Context, uid, threadID, runID, toolCallID string, paths []string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT coalesce(extra_metadata->'artifacts', '[]'::jsonb) FROM conversations
			WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted' FOR UPDATE`, threadID, uid).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var list []Artifact
		if json.Unmarshal(raw, &list) != nil {
			list = nil
		}
		for _, a := range list {
			if a.ToolCallID == toolCallID && a.RunID == runID {
				return nil // a replay
			}
		}
		now := time.Now().UTC().Format(time.RFC3339)
		for _, p := range paths {
			kept := list[:0]
			for _, a := range list {
				if a.Path != p {
					kept = append(kept, a)
				}
			}
			list = append(kept, Artifact{Path: p, RunID: runID, ToolCallID: toolCallID, PresentedAt: now})
		}
		b, err := json.Marshal(list)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE conversations SET extra_metadata = jsonb_set(coalesce(extra_metadata, '{}'::jsonb), '{artifacts}', $3::jsonb), updated_at = now()
			WHERE thread_id = $1 AND uid = $2`, threadID, uid, b)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("artifacts of %s: %w", threadID, err)
	}
	return nil
}

// Artifacts lists uid's thread's presented files, oldest first.
func (s *Store) Artifacts(ctx context.Context, uid, threadID string) ([]Artifact, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT coalesce(extra_metadata->'artifacts', '[]'::jsonb) FROM conversations
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted'`, threadID, uid).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("artifacts of %s: %w", threadID, err)
	}
	list := []Artifact{}
	_ = json.Unmarshal(raw, &list)
	return list, nil
}
