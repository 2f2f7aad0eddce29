package thread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// Attachment is a file confirmed into a thread, kept as the original in
// conversations.extra_metadata.attachments[] (no table of its own).
// RequestID is empty until a run request binds it (meta.attachment_file_ids).
type Attachment struct {
	FileID              string `json:"file_id"`
	FileName            string `json:"file_name"`
	FileType            string `json:"file_type"`
	FileSize            int64  `json:"file_size"`
	Status              string `json:"status"`
	UploadedAt          string `json:"uploaded_at"`
	Path                string `json:"path"` // what the agent reads: the parsed Markdown, else the original
	ArtifactURL         string `json:"artifact_url"`
	OriginalPath        string `json:"original_path"`
	OriginalArtifactURL string `json:"original_artifact_url"`
	RequestID           string `json:"request_id,omitempty"`
}

// ErrAttachmentNotFound is an attachment id the thread does not have.
var ErrAttachmentNotFound = failure.NotFound("attachment_not_found", "attachment not found")

// editAttachments runs edit on uid's thread's attachment list under a row
// lock and stores what it returns.
func (s *Store) editAttachments(ctx context.Context, uid, threadID string, edit func([]Attachment) ([]Attachment, error)) ([]Attachment, error) {
	var out []Attachment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT coalesce(extra_metadata->'attachments', '[]'::jsonb) FROM conversations
			WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted' FOR UPDATE`, threadID, uid).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var list []Attachment
		if err := json.Unmarshal(raw, &list); err != nil {
			list = nil // a foreign shape: start over rather than fail every call
		}
		if out, err = edit(list); err != nil {
			return err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE conversations SET extra_metadata = jsonb_set(extra_metadata, '{attachments}', $3::jsonb), updated_at = now()
			WHERE thread_id = $1 AND uid = $2`, threadID, uid, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("attachments of %s: %w", threadID, err)
	}
	return out, nil
}

// AddAttachments appends attachments (replacing any with the same file_id)
// and returns the whole list.
func (s *Store) AddAttachments(ctx context.Context, uid, threadID string, add []Attachment) ([]Attachment, error) {
	return s.editAttachments(ctx, uid, threadID, func(list []Attachment) ([]Attachment, error) {
		for _, a := range add {
			replaced := false
			for i := range list {
				if list[i].FileID == a.FileID {
					list[i], replaced = a, true
				}
			}
			if !replaced {
				list = append(list, a)
			}
		}
		return list, nil
	})
}

// Attachments lists uid's thread's attachments.
func (s *Store) Attachments(ctx context.Context, uid, threadID string) ([]Attachment, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT coalesce(extra_metadata->'attachments', '[]'::jsonb) FROM conversations
		WHERE thread_id = $1 AND uid = $2 AND status <> 'deleted'`, threadID, uid).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("attachments of %s: %w", threadID, err)
	}
	list := []Attachment{}
	_ = json.Unmarshal(raw, &list)
	return list, nil
}

// RemoveAttachment drops one attachment and returns it.
func (s *Store) RemoveAttachment(ctx context.Context, uid, threadID, fileID string) (Attachment, error) {
	var gone Attachment
	_, err := s.editAttachments(ctx, uid, threadID, func(list []Attachment) ([]Attachment, error) {
		for i, a := range list {
			if a.FileID == fileID {
				gone = a
				return append(list[:i], list[i+1:]...), nil
			}
		}
		return nil, ErrAttachmentNotFound
	})
	if errors.Is(err, ErrAttachmentNotFound) {
		return Attachment{}, ErrAttachmentNotFound
	}
	return gone, err
}

// BindAttachments marks the attachments fileIDs as sent with requestID
// and returns them in the order asked. An id the thread does not have, or
// one another request already bound, is 422 invalid_attachment_file_ids
// (the original's rule); binding again with the same request is a replay.
func (s *Store) BindAttachments(ctx context.Context, uid, threadID, requestID string, fileIDs []string) ([]Attachment, error) {
	if len(fileIDs) == 0 {
		return nil, nil
	}
	var bound []Attachment
	_, err := s.editAttachments(ctx, uid, threadID, func(list []Attachment) ([]Attachment, error) {
		bound = bound[:0]
		for _, id := range fileIDs {
			found := false
			for i := range list {
				if list[i].FileID != id {
					continue
				}
				found = true
				if list[i].RequestID != "" && list[i].RequestID != requestID {
					return nil, failure.Unprocessable("invalid_attachment_file_ids", "attachment %s was already sent with another request", id)
				}
				list[i].RequestID = requestID
				bound = append(bound, list[i])
			}
			if !found {
				return nil, failure.Unprocessable("invalid_attachment_file_ids", "attachment %s is not in this thread", id)
			}
		}
		return list, nil
	})
	if fe, ok := failure.As(err); ok && fe.Code == "invalid_attachment_file_ids" {
		return nil, fe
	}
	return bound, err
}
