package thread

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yuxi-serverless/yuxi/shared/failure"
)

// ErrMessageNotFound is returned for unknown messages and for messages of
// another user's (or a deleted) thread: an id never tells a second account
// that the message exists.
var ErrMessageNotFound = failure.NotFound("message_not_found", "message not found")

// Feedback is a user's rating of an assistant message (message_feedbacks).
type Feedback struct {
	ID        int64     `json:"id"`
	MessageID int64     `json:"message_id"`
	Rating    string    `json:"rating"` // like | dislike
	Reason    *string   `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FeedbackInput is POST /api/chat/message/{message_id}/feedback.
type FeedbackInput struct {
	Rating string  `json:"rating"`
	Reason *string `json:"reason"`
}

// maxFeedbackReason bounds a feedback's reason (bytes).
const maxFeedbackReason = 2000

// ownMessage returns the role and type of uid's message messageID, or
// ErrMessageNotFound. Ownership is checked before anything about the input
// is: a second account learns nothing from the answer.
func ownMessage(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, uid string, messageID int64) (role, messageType string, err error) {
	err = q.QueryRow(ctx, `SELECT m.role, m.message_type FROM messages m JOIN conversations c ON c.id = m.conversation_id
		WHERE m.id = $1 AND c.uid = $2 AND c.status <> 'deleted'`, messageID, uid).Scan(&role, &messageType)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", ErrMessageNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("load message %d: %w", messageID, err)
	}
	return role, messageType, nil
}

// SubmitFeedback records uid's rating of their assistant message. There is
// one feedback per (user, message); submitting again edits it (the original
// answered 409 to a second submission; editing is what the product wants
// now). Only answers are rated: user, tool and resume messages get 422.
func (s *Store) SubmitFeedback(ctx context.Context, uid string, messageID int64, in FeedbackInput) (Feedback, error) {
	role, _, err := ownMessage(ctx, s.pool, uid, messageID)
	if err != nil {
		return Feedback{}, err
	}
	if in.Rating != "like" && in.Rating != "dislike" {
		return Feedback{}, failure.Unprocessable("invalid_rating", "rating must be 'like' or 'dislike'")
	}
	if role != "assistant" {
		return Feedback{}, failure.Unprocessable("feedback_not_supported", "feedback is only supported for assistant messages")
	}
	var reason *string
	if in.Reason != nil {
		r := strings.TrimSpace(*in.Reason)
		if len(r) > maxFeedbackReason {
			return Feedback{}, failure.Unprocessable("invalid_feedback", "reason is longer than %d bytes", maxFeedbackReason)
		}
		if r != "" {
			reason = &r
		}
	}
	var f Feedback
	err = s.pool.QueryRow(ctx, `INSERT INTO message_feedbacks (message_id, uid, rating, reason) VALUES ($1, $2, $3, $4)
		ON CONFLICT (message_id, uid) DO UPDATE SET rating = EXCLUDED.rating, reason = EXCLUDED.reason, updated_at = now()
		RETURNING id, message_id, rating, reason, created_at, updated_at`, messageID, uid, in.Rating, reason).
		Scan(&f.ID, &f.MessageID, &f.Rating, &f.Reason, &f.CreatedAt, &f.UpdatedAt)
	if err != nil {
		return Feedback{}, fmt.Errorf("store feedback: %w", err)
	}
	return f, nil
}

// GetFeedback returns uid's feedback on their message, nil when none.
func (s *Store) GetFeedback(ctx context.Context, uid string, messageID int64) (*Feedback, error) {
	if _, _, err := ownMessage(ctx, s.pool, uid, messageID); err != nil {
		return nil, err
	}
	var f Feedback
	err := s.pool.QueryRow(ctx, `SELECT id, message_id, rating, reason, created_at, updated_at FROM message_feedbacks
		WHERE message_id = $1 AND uid = $2`, messageID, uid).Scan(&f.ID, &f.MessageID, &f.Rating, &f.Reason, &f.CreatedAt, &f.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load feedback: %w", err)
	}
	return &f, nil
}
